"""SES's tenants, which moto's SES lacks, played in the emulator's SESv2 (same host and port, reached with a plain
boto3 ``sesv2`` client) as SES documents them.

What it plays:

- Tenants (``CreateTenant``, ``GetTenant``, ``ListTenants``, ``DeleteTenant``) and each tenant's reputation entity
  (``GetReputationEntity``, ``ListReputationEntities``, ``UpdateReputationEntityCustomerManagedStatus``), whose
  sending status is SES's aggregate: DISABLED if the customer-managed or the SES-managed status is DISABLED,
  REINSTATED if the customer reinstated it (sending despite findings, SES-managed permitting), else ENABLED.
  SES's own status cannot be set through SES's API (SES sets it on its findings), so the emulator has a control:
  ``POST /moto-api/sendonce/ses-reputation`` ``{"tenantName": NAME, "status": "DISABLED"|"ENABLED", "cause": TEXT}``.
- A SendEmail whose ``TenantName`` names a tenant whose aggregate status is DISABLED answers HTTP 400
  ``SendingPausedException``: SES's API reference names no error for a disabled tenant, and that is the only
  "paused" error SendEmail lists; a client confirms with GetTenant's ``SendingStatus``. A ``TenantName`` the
  emulator does not know is accepted, as before: moto has no tenants, and a stack deployed to the emulator makes
  none. SendEmail's checks, and the order they run in, are :mod:`.ses_account`'s.

What it cannot play: SES's findings themselves (bounce and complaint rates never disable anything by themselves:
the control does), reputation policies (every tenant has the standard one, and it does nothing) and tenant resource
associations (any identity or configuration set sends for any tenant).

The tenants live in the emulator's process, per account and region, in a moto backend: moto's own reset
(``POST /moto-api/reset``, which :meth:`.server.LocalAws.reset` calls) forgets them as it forgets moto's services,
also when the emulator runs as its own process (``sendonce-local serve``).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend

from .ses_api import ControlRefused, SesError, add_sesv2_operations, control, request_params, serve_control

REPUTATION_CONTROL_PATH = "/moto-api/sendonce/ses-reputation"

ENABLED, REINSTATED, DISABLED = "ENABLED", "REINSTATED", "DISABLED"
SENDING_STATUSES = (ENABLED, REINSTATED, DISABLED)
RESOURCE = "RESOURCE"  # the only reputation entity type SES has


@dataclass
class StatusRecord:
    status: str = ENABLED
    cause: str | None = None
    updated_at: float = field(default_factory=time.time)

    def as_json(self) -> dict[str, Any]:
        record: dict[str, Any] = {"Status": self.status, "LastUpdatedTimestamp": self.updated_at}
        if self.cause is not None:
            record["Cause"] = self.cause
        return record


def aggregate(customer: str, ses_managed: str) -> str:
    """SES's rule: DISABLED if either side is; REINSTATED if the customer reinstated (SES permitting); else
    ENABLED."""
    if DISABLED in (customer, ses_managed):
        return DISABLED
    return REINSTATED if customer == REINSTATED else ENABLED


@dataclass
class Tenant:
    name: str
    tenant_id: str
    arn: str
    created_at: float
    tags: list[dict[str, str]]
    policy: str
    customer_managed: StatusRecord = field(default_factory=StatusRecord)
    ses_managed: StatusRecord = field(default_factory=StatusRecord)

    @property
    def sending_status(self) -> str:
        return aggregate(self.customer_managed.status, self.ses_managed.status)

    def info(self) -> dict[str, Any]:
        """SES's TenantInfo."""
        return {"TenantName": self.name, "TenantId": self.tenant_id, "TenantArn": self.arn,
                "CreatedTimestamp": self.created_at, "SendingStatus": self.sending_status}

    def as_json(self) -> dict[str, Any]:
        """SES's Tenant (and CreateTenant's answer)."""
        return {**self.info(), "Tags": self.tags}

    def reputation_entity(self) -> dict[str, Any]:
        return {"ReputationEntityReference": self.arn, "ReputationEntityType": RESOURCE,
                "ReputationManagementPolicy": self.policy,
                "CustomerManagedStatus": self.customer_managed.as_json(),
                "AwsSesManagedStatus": self.ses_managed.as_json(),
                "SendingStatusAggregate": self.sending_status, "ReputationImpact": "LOW"}


class SesTenantsBackend(BaseBackend):
    """One account and region's SES tenants. A moto backend, so moto's reset forgets them with moto's own."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.tenants: dict[str, Tenant] = {}
        self._lock = threading.Lock()

    def check_sending(self, tenant_name: str | None) -> None:
        """Raise SES's error if the tenant a send names is disabled (a name not known here sends)."""
        with self._lock:
            tenant = self.tenants.get(tenant_name or "")
            if tenant is not None and tenant.sending_status == DISABLED:
                # Not naming the tenant: SES's wording is undocumented, and a tenant's name can be a customer's.
                raise SesError("SendingPausedException", "The message can't be sent because the tenant's ability "
                               "to send email is currently paused.")

    def create_tenant(self, name: str, tags: list[dict[str, str]]) -> Tenant:
        with self._lock:
            if name in self.tenants:
                raise SesError("AlreadyExistsException", f"Tenant {name} already exists.")
            tenant_id = uuid.uuid4().hex  # SES documents no format for it
            tenant = Tenant(name=name, tenant_id=tenant_id, created_at=time.time(), tags=tags,
                            arn=f"arn:{self.partition}:ses:{self.region_name}:{self.account_id}:tenant/{name}/"
                                f"{tenant_id}",
                            policy=f"arn:{self.partition}:ses:{self.region_name}:aws:reputation-policy/standard")
            self.tenants[name] = tenant
            return tenant

    def tenant(self, name: str) -> Tenant:
        found = self.tenants.get(name)
        if found is None:
            raise SesError("NotFoundException", f"Tenant {name} does not exist.", 404)
        return found

    def delete_tenant(self, name: str) -> None:
        with self._lock:
            self.tenant(name)
            del self.tenants[name]

    def tenant_by_arn(self, arn: str) -> Tenant:
        for tenant in list(self.tenants.values()):
            if tenant.arn == arn:
                return tenant
        raise SesError("NotFoundException", f"Reputation entity {arn} does not exist.", 404)

    def set_status(self, tenant: Tenant, side: str, status: str, cause: str | None) -> None:
        with self._lock:
            setattr(tenant, side, StatusRecord(status, cause))


ses_tenants_backends = BackendDict(SesTenantsBackend, "sesv2")


def _backend(response: Any) -> SesTenantsBackend:
    return ses_tenants_backends[response.current_account][response.region]


def _required_name(params: dict[str, Any], member: str) -> str:
    value = params.get(member)
    if not isinstance(value, str) or not value:
        raise SesError("BadRequestException", f"{member} is required.")
    return value


def _page(items: list[dict[str, Any]], params: dict[str, Any], member: str) -> str:
    """One page of ``items`` as SES lists them (PageSize, NextToken: here the index of the page's first item)."""
    try:
        start = int(params.get("NextToken") or 0)
        size = int(params.get("PageSize") or 1000)
    except (TypeError, ValueError) as error:
        raise SesError("BadRequestException", "Invalid NextToken or PageSize.") from error
    answer: dict[str, Any] = {member: items[start : start + size]}
    if start + size < len(items):
        answer["NextToken"] = str(start + size)
    return json.dumps(answer)


TENANT_PATHS = (
    "{0}/v2/email/tenants$",
    "{0}/v2/email/tenants/get$",
    "{0}/v2/email/tenants/list$",
    "{0}/v2/email/tenants/delete$",
    "{0}/v2/email/reputation/entities$",
    # An entity's reference is an ARN, whose "/" arrive decoded; the customer-managed-status path falls in here too.
    "{0}/v2/email/reputation/entities/(?P<ReputationEntityType>[^/]+)/(?P<ReputationEntityReference>.+)$",
)


def create_tenant(self: Any) -> str:
    params = request_params(self)
    tags = params.get("Tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, dict) and {"Key", "Value"} <= t.keys() for t in tags):
        raise SesError("BadRequestException", "Each tag needs a Key and a Value.")
    tenant = _backend(self).create_tenant(_required_name(params, "TenantName"), tags)
    return json.dumps(tenant.as_json())


def get_tenant(self: Any) -> str:
    return json.dumps({"Tenant": _backend(self).tenant(_required_name(request_params(self), "TenantName")).as_json()})


def list_tenants(self: Any) -> str:
    params = request_params(self)
    wanted = params.get("Filter") or {}
    tenants = [t.info() for t in list(_backend(self).tenants.values())
               if wanted.get("TENANT_NAME_CONTAINS", "") in t.name
               and wanted.get("SENDING_STATUS", t.sending_status) == t.sending_status]
    return _page(tenants, params, "Tenants")


def delete_tenant(self: Any) -> str:
    _backend(self).delete_tenant(_required_name(request_params(self), "TenantName"))
    return "{}"


def _entity(self: Any) -> Tenant:
    entity_type = self.uri_match.get("ReputationEntityType")
    if entity_type != RESOURCE:
        raise SesError("BadRequestException", f"Unsupported reputation entity type {entity_type}.")
    # moto's router hands the reference percent-decoded, as SES reads it
    return _backend(self).tenant_by_arn(self.uri_match.get("ReputationEntityReference", ""))


def get_reputation_entity(self: Any) -> str:
    return json.dumps({"ReputationEntity": _entity(self).reputation_entity()})


def list_reputation_entities(self: Any) -> str:
    params = request_params(self)
    wanted = params.get("Filter") or {}
    entities = [t.reputation_entity() for t in list(_backend(self).tenants.values())]
    entities = [e for e in entities
                if wanted.get("ENTITY_TYPE", RESOURCE) == e["ReputationEntityType"]
                and wanted.get("SENDING_STATUS", e["SendingStatusAggregate"]) == e["SendingStatusAggregate"]
                and wanted.get("REPUTATION_IMPACT", e["ReputationImpact"]) == e["ReputationImpact"]
                and e["ReputationEntityReference"].startswith(wanted.get("ENTITY_REFERENCE_PREFIX", ""))]
    return _page(entities, params, "ReputationEntities")


def update_reputation_entity_customer_managed_status(self: Any) -> str:
    status = request_params(self).get("SendingStatus")
    if status not in SENDING_STATUSES:
        raise SesError("BadRequestException", f"SendingStatus must be one of {', '.join(SENDING_STATUSES)}.")
    try:
        tenant = _entity(self)
    except SesError as error:  # the operation documents no NotFoundException
        raise SesError("BadRequestException", error.message) from error
    _backend(self).set_status(tenant, "customer_managed", status, None)
    return "{}"


TENANT_OPERATIONS: tuple[Callable[[Any], str], ...] = (
    create_tenant, get_tenant, list_tenants, delete_tenant,
    get_reputation_entity, list_reputation_entities, update_reputation_entity_customer_managed_status)


def play_ses_tenants() -> None:
    """Add the tenants' and reputation entities' operations to moto's SESv2 (before its server answers its first
    SESv2 request; idempotent)."""
    add_sesv2_operations(TENANT_PATHS, TENANT_OPERATIONS)


@control(ses_tenants_backends)
def set_ses_managed_status(body: dict[str, Any], backend: SesTenantsBackend) -> dict[str, Any]:
    name, status, cause = body.get("tenantName"), body.get("status"), body.get("cause")
    if not isinstance(name, str) or not name:
        raise ControlRefused(400, "tenantName must name a tenant")
    if status not in (ENABLED, DISABLED):
        raise ControlRefused(400, "status must be DISABLED or ENABLED")
    if cause is not None and (not isinstance(cause, str) or not 1 <= len(cause) <= 512):
        raise ControlRefused(400, "cause must be a text of 1 to 512 characters")
    tenant = backend.tenants.get(name)
    if tenant is None:
        raise ControlRefused(404, f"no tenant {name} in account {backend.account_id}, region {backend.region_name}")
    backend.set_status(tenant, "ses_managed", status, cause)
    return {"tenantName": name, "sendingStatus": tenant.sending_status}


def serve_ses_reputation_control() -> None:
    """Add ``POST /moto-api/sendonce/ses-reputation`` to moto's API application (idempotent; before the server
    answers its first /moto-api)."""
    serve_control(REPUTATION_CONTROL_PATH, set_ses_managed_status)
