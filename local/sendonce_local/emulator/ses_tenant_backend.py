"""SES's tenants as the emulator keeps them (:mod:`.ses_tenants` answers SES's API for them): each tenant with its
two sending statuses and their aggregate, its reputation policy and its suppression settings, in a moto backend per
account and region, so moto's reset forgets them with moto's own services.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend

from sendonce_contract.ses_tenant_settings import (
    InvalidTenantSetting,
    ReputationPolicy,
    TenantSuppression,
    reputation_policy_of,
)

from .ses_api import SesError

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
    suppression: TenantSuppression | None = None  # None: SES's default, the account's list
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
        settings = {} if self.suppression is None else {"SuppressionAttributes": self.suppression.as_api()}
        return {**self.info(), "Tags": self.tags, **settings}

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

    def create_tenant(self, name: str, tags: list[dict[str, str]],
                      suppression: TenantSuppression | None = None) -> Tenant:
        with self._lock:
            if name in self.tenants:
                raise SesError("AlreadyExistsException", f"Tenant {name} already exists.")
            tenant_id = uuid.uuid4().hex  # SES documents no format for it
            tenant = Tenant(name=name, tenant_id=tenant_id, created_at=time.time(), tags=tags,
                            arn=f"arn:{self.partition}:ses:{self.region_name}:{self.account_id}:tenant/{name}/"
                                f"{tenant_id}",
                            policy=ReputationPolicy.STANDARD.arn(self.partition, self.region_name),
                            suppression=suppression)
            self.tenants[name] = tenant
            return tenant

    def set_policy(self, tenant: Tenant, policy_arn: str) -> None:
        try:
            reputation_policy_of(policy_arn)
        except InvalidTenantSetting as error:
            raise SesError("BadRequestException", str(error)) from None
        with self._lock:
            tenant.policy = policy_arn

    def set_suppression(self, tenant: Tenant, suppression: TenantSuppression) -> None:
        with self._lock:
            tenant.suppression = suppression

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


def suppression_of(attributes: object) -> TenantSuppression | None:
    """SES's ``SuppressionAttributes`` as given (None: not given), or SES's refusal of them."""
    if attributes is None:
        return None
    if not isinstance(attributes, dict):
        raise SesError("BadRequestException", "SuppressionAttributes must be an object.")
    return suppression_settings(attributes)


def suppression_settings(attributes: dict[str, Any]) -> TenantSuppression:
    try:
        return TenantSuppression.from_api(attributes)
    except InvalidTenantSetting as error:
        raise SesError("BadRequestException", str(error)) from None
