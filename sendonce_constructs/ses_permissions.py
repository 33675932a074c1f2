"""The SES grant: the identity's ARN, never a wildcard, and a From-address condition."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from aws_cdk import aws_iam as iam

SEND_ACTION = "ses:SendEmail"
RAW_SEND_ACTION = "ses:SendRawEmail"  # SESv2 SendEmail with raw MIME content needs this one too


def identity_arn(stack: Stack, identity_name: str) -> str:
    return stack.format_arn(service="ses", resource="identity", resource_name=identity_name)


def configuration_set_arn(stack: Stack, name: str) -> str:
    return stack.format_arn(service="ses", resource="configuration-set", resource_name=name)


def any_tenant_arn(stack: Stack) -> str:
    """Every SES tenant of the stack's account and region (``tenant/<name>/<id>``: SES assigns the id)."""
    return stack.format_arn(service="ses", resource="tenant/*")


def tenant_status_statement(stack: Stack) -> iam.PolicyStatement:
    """Read a tenant's sending status (GetTenant), which tells a paused tenant from a paused account."""
    return iam.PolicyStatement(actions=["ses:GetTenant"], resources=[any_tenant_arn(stack)])


ACCOUNT_READ_ACTION = "ses:GetAccount"  # the sending quota and rate; SES offers no resource-level permission for it
ACCOUNT_READ_REASON = ("ses:GetAccount reads the account's sending quota and rate; it has no resource-level "
                       "permission.")


def account_read_statement() -> iam.PolicyStatement:
    """Read the account's sending quota and rate (GetAccount)."""
    return iam.PolicyStatement(actions=[ACCOUNT_READ_ACTION], resources=["*"])


def from_address_patterns(sender: str | None, from_addresses: Sequence[str] | None) -> list[str] | None:
    """What ``ses:FromAddress`` may be: the listed addresses, the address identity, or any address of the domain."""
    if from_addresses:
        return [a.lower() for a in from_addresses]
    if sender is None:
        return None
    return [sender.lower()] if "@" in sender else [f"*@{sender.lower()}"]


def send_statement(resources: list[str], from_patterns: list[str] | None, allow_raw: bool) -> iam.PolicyStatement:
    conditions = {"StringLike": {"ses:FromAddress": from_patterns}} if from_patterns else None
    actions = [SEND_ACTION, RAW_SEND_ACTION] if allow_raw else [SEND_ACTION]
    return iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions)
