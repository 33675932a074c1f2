"""`sendonce tenants`: each SES tenant's sending status and settings (its reputation policy, its suppression list)
as SES reports them, and the stops this pipeline's lanes have learned (docs: when SES stops sending).

SES keeps a tenant's status in its reputation entity: the customer-managed status (the operator's), the
SES-managed status (SES's own, from its findings, with a cause) and their aggregate, which decides whether the
tenant may send. The pipeline's stops are the items its consumers write when SES refuses a lane or a tenant.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sendonce_contract.schema import SesStopItem
from sendonce_contract.ses_tenant_settings import (
    InvalidTenantSetting,
    ReputationPolicy,
    TenantSuppression,
    reputation_policy_of,
)

RESOURCE = "RESOURCE"  # the only reputation entity type SES has: a tenant's entity is a resource's


@dataclass(frozen=True)
class TenantStatus:
    tenant: str
    aggregate: str  # ENABLED, REINSTATED or DISABLED: whether SES lets it send
    customer_managed: str
    ses_managed: str
    ses_cause: str | None  # why SES set its status, when it says
    impact: str | None
    reputation_policy: str  # SES's managed policy: none, standard or strict
    suppression_scope: str  # TENANT (its own list) or ACCOUNT (the account's, SES's default)
    suppressed_reasons: list[str]  # what adds an address to that list: BOUNCE, COMPLAINT


@dataclass(frozen=True)
class LaneStop:
    lane: str
    scope: str  # "account", or "tenant/<name>" (its digest with key_privacy)
    kind: str  # paused, setup or quota
    reason: str
    stopped_at_ms: int
    resumed_at_ms: int | None


def tenant_statuses(ses: Any) -> list[TenantStatus]:
    """Every tenant of the account and region, with its reputation entity's status."""
    return [_status(ses, tenant) for tenant in _tenants(ses)]


def _tenants(ses: Any) -> Iterator[dict[str, Any]]:
    request: dict[str, Any] = {}
    while True:
        page = ses.list_tenants(**request)
        yield from page.get("Tenants", [])
        if not page.get("NextToken"):
            return
        request["NextToken"] = page["NextToken"]


def _status(ses: Any, tenant: dict[str, Any]) -> TenantStatus:
    entity = ses.get_reputation_entity(ReputationEntityType=RESOURCE,
                                       ReputationEntityReference=tenant["TenantArn"])["ReputationEntity"]
    # ListTenants names a tenant; GetTenant has its suppression list's settings.
    settings = ses.get_tenant(TenantName=tenant["TenantName"])["Tenant"].get("SuppressionAttributes") or {}
    suppression = TenantSuppression.from_api(settings)
    customer = entity.get("CustomerManagedStatus") or {}
    ses_managed = entity.get("AwsSesManagedStatus") or {}
    return TenantStatus(tenant=tenant["TenantName"], aggregate=entity.get("SendingStatusAggregate", "-"),
                        customer_managed=customer.get("Status", "-"), ses_managed=ses_managed.get("Status", "-"),
                        ses_cause=ses_managed.get("Cause"), impact=entity.get("ReputationImpact"),
                        reputation_policy=_policy_name(entity.get("ReputationManagementPolicy")),
                        suppression_scope=suppression.scope.value,
                        suppressed_reasons=[reason.value for reason in suppression.reasons])


def _policy_name(arn: str | None) -> str:
    if not arn:
        return ReputationPolicy.STANDARD.value  # a tenant made without one has SES's standard
    try:
        return reputation_policy_of(arn).value
    except InvalidTenantSetting:
        return arn  # a policy SES added after this release: shown as SES names it


def lane_stops(dynamodb: Any, table: str) -> list[LaneStop]:
    """The stops the pipeline's consumers recorded, newest first (a scan of the stop items only)."""
    request: dict[str, Any] = {
        "TableName": table, "FilterExpression": "begins_with(#key, :prefix)",
        "ExpressionAttributeNames": {"#key": SesStopItem.KEY},
        "ExpressionAttributeValues": {":prefix": {"S": SesStopItem.KEY_PREFIX}}}
    found = []
    while True:
        page = dynamodb.scan(**request)
        found += [_stop(item) for item in page.get("Items", []) if SesStopItem.STOPPED_AT in item]
        if "LastEvaluatedKey" not in page:
            return sorted(found, key=lambda stop: stop.stopped_at_ms, reverse=True)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _stop(item: dict[str, Any]) -> LaneStop:
    def text(name: str) -> str:
        return str(item.get(name, {}).get("S", ""))

    resumed = item.get(SesStopItem.RESUMED_AT, {}).get("N")
    return LaneStop(lane=text(SesStopItem.LANE) or "jobs", scope=text(SesStopItem.SCOPE), kind=text(SesStopItem.KIND),
                    reason=text(SesStopItem.REASON), stopped_at_ms=int(item[SesStopItem.STOPPED_AT]["N"]),
                    resumed_at_ms=None if resumed is None else int(resumed))
