"""SES's tenants, which moto's SES lacks, played in the emulator's SESv2 (same host and port, reached with a plain
boto3 ``sesv2`` client) as SES documents them.

What it plays:

- Tenants (``CreateTenant``, ``GetTenant``, ``ListTenants``, ``DeleteTenant``) with their suppression list settings
  (``SuppressionAttributes``, ``PutTenantSuppressionAttributes``), and each tenant's reputation entity
  (``GetReputationEntity``, ``ListReputationEntities``, ``UpdateReputationEntityCustomerManagedStatus``,
  ``UpdateReputationEntityPolicy``: one of SES's managed policies, standard unless set), whose
  sending status is SES's aggregate: DISABLED if the customer-managed or the SES-managed status is DISABLED,
  REINSTATED if the customer reinstated it (sending despite findings, SES-managed permitting), else ENABLED.
  SES's own status cannot be set through SES's API (SES sets it on its findings), so the emulator has a control:
  ``POST /moto-api/sendonce/ses-reputation`` ``{"tenantName": NAME, "status": "DISABLED"|"ENABLED", "cause": TEXT}``.
- A SendEmail whose ``TenantName`` names a tenant whose aggregate status is DISABLED answers HTTP 400
  ``SendingPausedException``: SES's API reference names no error for a disabled tenant, and that is the only
  "paused" error SendEmail lists; a client confirms with GetTenant's ``SendingStatus``. A ``TenantName`` the
  emulator does not know is accepted, as before: moto has no tenants, and a stack deployed to the emulator makes
  none. SendEmail's checks, and the order they run in, are :mod:`.ses_account`'s.

- ``AWS::SES::Tenant`` in a stack (moto's CloudFormation skips the type): :mod:`.cfn_ses_tenants`.

What it cannot play: SES's findings themselves (bounce and complaint rates never disable anything by themselves:
the control does), what a reputation policy does on them (it is kept and shown, nothing more), a suppression list's
entries (a send to a suppressed address is sent) and tenant resource associations (any identity or configuration set
sends for any tenant).

The tenants live in the emulator's process, per account and region, in a moto backend (:mod:`.ses_tenant_backend`):
moto's own reset (``POST /moto-api/reset``, which :meth:`.server.LocalAws.reset` calls) forgets them as it forgets
moto's services, also when the emulator runs as its own process (``sendonce-local serve``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .ses_api import ControlRefused, SesError, add_sesv2_operations, control, request_params, serve_control
from .ses_tenant_backend import (
    DISABLED,
    ENABLED,
    RESOURCE,
    SENDING_STATUSES,
    SesTenantsBackend,
    Tenant,
    ses_tenants_backends,
    suppression_of,
    suppression_settings,
)

REPUTATION_CONTROL_PATH = "/moto-api/sendonce/ses-reputation"

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
    "{0}/v2/email/tenant/suppression$",
    "{0}/v2/email/reputation/entities$",
    # An entity's reference is an ARN, whose "/" arrive decoded; the customer-managed-status path falls in here too.
    "{0}/v2/email/reputation/entities/(?P<ReputationEntityType>[^/]+)/(?P<ReputationEntityReference>.+)$",
)


def create_tenant(self: Any) -> str:
    params = request_params(self)
    tags = params.get("Tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, dict) and {"Key", "Value"} <= t.keys() for t in tags):
        raise SesError("BadRequestException", "Each tag needs a Key and a Value.")
    tenant = _backend(self).create_tenant(_required_name(params, "TenantName"), tags,
                                          suppression_of(params.get("SuppressionAttributes")))
    return json.dumps(tenant.as_json())


def put_tenant_suppression_attributes(self: Any) -> str:
    params = request_params(self)
    backend = _backend(self)
    tenant = backend.tenant(_required_name(params, "TenantName"))
    backend.set_suppression(tenant, suppression_settings(params))
    return "{}"


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


def update_reputation_entity_policy(self: Any) -> str:
    policy = request_params(self).get("ReputationEntityPolicy")
    if not isinstance(policy, str) or not policy:
        raise SesError("BadRequestException", "ReputationEntityPolicy is required.")
    _backend(self).set_policy(_entity(self), policy)
    return "{}"


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
    create_tenant, get_tenant, list_tenants, delete_tenant, put_tenant_suppression_attributes,
    get_reputation_entity, list_reputation_entities, update_reputation_entity_customer_managed_status,
    update_reputation_entity_policy)


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

