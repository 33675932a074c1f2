"""cdk-nag findings this construct accepts on purpose, each placed on the resource it is about, with the reason."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def wildcard_resource_finding(scope: IConstruct, resource: str) -> str:
    """The AwsSolutions-IAM5 finding id of a grant on ``resource`` (an ARN with a wildcard, tokens allowed) as
    cdk-nag names it: resolved first, so a stack with a concrete account and region names them, not the pseudo
    parameters."""
    return f"AwsSolutions-IAM5[Resource::{nag_text(Stack.of(scope).resolve(resource))}]"


def nag_text(value: Any) -> str:
    """A resolved value as cdk-nag renders it in a finding: an intrinsic as <LogicalId.Attribute> or <Ref>, joined
    parts as they are."""
    if isinstance(value, str):
        return value
    if "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(nag_text(part) for part in parts)
    return str(value)
