"""An SES tenant's own settings, as SES names them: its reputation policy and its suppression list. The construct
sets them (``SendOnceEmailQueue.add_ses_tenant``), ``sendonce tenants`` shows them and the emulator keeps them, each
from this one module.

- **Reputation policy**: one of SES's managed policies, by ARN (``arn:<partition>:ses:<region>:aws:
  reputation-policy/<name>``): how readily SES pauses the tenant on its reputation findings, from ``none`` to
  ``strict``. A tenant made without one has ``standard``.
- **Suppression**: whether the tenant keeps its own suppression list (``TENANT``) or uses the account's
  (``ACCOUNT``, SES's default), and which events add an address to it (``BOUNCE``, a hard bounce; ``COMPLAINT``).
  SES then drops a send to a suppressed address itself, after accepting it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

__all__ = ["InvalidTenantSetting", "ReputationPolicy", "SuppressionReason", "SuppressionScope", "TenantSuppression",
           "reputation_policy", "reputation_policy_of"]

POLICY_RESOURCE = "reputation-policy"  # an SES-managed policy's ARN: arn:<partition>:ses:<region>:aws:<this>/<name>
_POLICY_ARN = re.compile(rf"^arn:[a-z0-9-]+:ses:[a-z0-9-]+:aws:{POLICY_RESOURCE}/(?P<name>[a-z]+)$")


class ReputationPolicy(StrEnum):
    """SES's managed reputation policies for a tenant, by the name their ARN ends in."""

    NONE = "none"
    STANDARD = "standard"  # SES's default for a new tenant
    STRICT = "strict"

    def arn(self, partition: str, region: str) -> str:
        return f"arn:{partition}:ses:{region}:aws:{POLICY_RESOURCE}/{self.value}"


class SuppressionScope(StrEnum):
    ACCOUNT = "ACCOUNT"  # the account's suppression list (SES's default)
    TENANT = "TENANT"  # the tenant's own


class SuppressionReason(StrEnum):
    BOUNCE = "BOUNCE"  # a hard bounce adds the address
    COMPLAINT = "COMPLAINT"


class InvalidTenantSetting(ValueError):
    """A setting SES would refuse; the message names it, the value and what SES takes."""


@dataclass(frozen=True)
class TenantSuppression:
    """A tenant's suppression list settings (SES's ``SuppressionAttributes``). By default the tenant's own list,
    added to on bounces and complaints: one customer's bad addresses never suppress another's mail."""

    scope: SuppressionScope = SuppressionScope.TENANT
    reasons: tuple[SuppressionReason, ...] = (SuppressionReason.BOUNCE, SuppressionReason.COMPLAINT)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scope", _member(SuppressionScope, self.scope, "suppression scope"))
        if isinstance(self.reasons, str) or not isinstance(self.reasons, tuple | list):
            raise InvalidTenantSetting(f"suppression reasons ({self.reasons!r}) must be a list of "
                                       f"{_names(SuppressionReason)}")
        reasons = tuple(_member(SuppressionReason, reason, "suppression reason") for reason in self.reasons)
        if len(set(reasons)) != len(reasons):
            raise InvalidTenantSetting(f"suppression reasons ({[r.value for r in reasons]}) name one twice")
        object.__setattr__(self, "reasons", reasons)

    def as_api(self) -> dict[str, Any]:
        """SES's ``SuppressionAttributes`` (CreateTenant, PutTenantSuppressionAttributes, AWS::SES::Tenant)."""
        return {"SuppressedReasons": [reason.value for reason in self.reasons], "SuppressionScope": self.scope.value}

    @classmethod
    def from_api(cls, attributes: dict[str, Any]) -> TenantSuppression:
        return cls(scope=attributes.get("SuppressionScope", SuppressionScope.ACCOUNT),
                   reasons=tuple(attributes.get("SuppressedReasons") or ()))


def reputation_policy(value: object) -> ReputationPolicy:
    """``value`` (a member, or the name SES's ARN ends in) as a policy; else :class:`InvalidTenantSetting`."""
    return _member(ReputationPolicy, value, "reputation policy")


def reputation_policy_of(arn: str) -> ReputationPolicy:
    """The managed policy an ARN names; :class:`InvalidTenantSetting` for an ARN that names none."""
    match = _POLICY_ARN.match(arn)
    if match is None:
        raise InvalidTenantSetting(f"reputation policy {arn!r} is not an SES-managed policy's ARN "
                                   f"(arn:<partition>:ses:<region>:aws:{POLICY_RESOURCE}/<name>)")
    return reputation_policy(match["name"])


Member = TypeVar("Member", bound=StrEnum)


def _member(kind: type[Member], value: object, what: str) -> Member:
    try:
        return kind(value)  # type: ignore[arg-type]  # a value of the wrong type is refused as a wrong value is
    except ValueError:
        raise InvalidTenantSetting(f"{what} ({value!r}) must be one of {_names(kind)}") from None


def _names(kind: type[StrEnum]) -> str:
    return ", ".join(f"{kind.__name__}.{member.name}" for member in kind)
