"""Synthesizes a SendOnceEmailQueue in a fresh stack and hands back the template."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template

from sendonce_constructs import SendOnceEmailQueue


def make_stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Test")


def build(stack: cdk.Stack | None = None, **props: Any) -> tuple[SendOnceEmailQueue, Template]:
    stack = stack or make_stack()
    props.setdefault("sender", "example.com")
    pipeline = SendOnceEmailQueue(stack, "Receipts", **props)
    return pipeline, Template.from_stack(stack)


# Parts tested on their own (test_ses_evidence_construct, test_outcome_events, the quota watch's in
# test_security_and_observability, test_waiting_room): their resources are left out here.
OWN_PARTS = ("SesEvidence", "OutcomeEvents", "QuotaWatch", "WaitingRoom")


def pipeline_resources(template: Template, resource_type: str, match: dict[str, Any] | None = None) -> dict:
    """The job pipeline's own resources of a type: the parts tested on their own are left out."""
    found = template.find_resources(resource_type, match or None)
    return {name: resource for name, resource in found.items() if not any(part in name for part in OWN_PARTS)}


def only(template: Template, resource_type: str, **match: Any) -> dict[str, Any]:
    found = pipeline_resources(template, resource_type, match)
    assert len(found) == 1, f"expected one {resource_type}, found {len(found)}"
    return next(iter(found.values()))


def queue_by_retention(template: Template, seconds: int) -> dict[str, Any]:
    return only(template, "AWS::SQS::Queue", Properties={"MessageRetentionPeriod": seconds})


def policy_statements(template: Template) -> list[dict[str, Any]]:
    return [
        statement
        for policy in pipeline_resources(template, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def statement_actions(statement: dict[str, Any]) -> list[str]:
    """A policy statement's actions: CloudFormation writes a single one as a string."""
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def actions_of(statements: list[dict[str, Any]]) -> set[str]:
    return {action for statement in statements for action in statement_actions(statement)}


def ses_statement(template: Template) -> dict[str, Any]:
    [statement] = [s for s in policy_statements(template) if "ses:SendEmail" in str(s["Action"])]
    return statement


def evidence_statements(template: Template) -> list[dict[str, Any]]:
    """The policy statements of the SES evidence part (the recorder's role)."""
    return [
        statement
        for name, policy in template.find_resources("AWS::IAM::Policy").items() if "SesEvidence" in name
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
