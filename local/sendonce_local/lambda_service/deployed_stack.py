"""Reads a stack deployed to the emulator: its SQS- and DynamoDB-stream-triggered functions, with their code from
cdk.out. A stack it cannot read is a :class:`StackNotFound` that names the stacks it can."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from .instances import FunctionSpec
from .sqs_source import EventSourceSpec
from .stream_source import StreamSourceSpec

DEFAULT_MAX_CONCURRENCY = 5


class StackNotFound(LookupError):
    pass


@dataclass(frozen=True)
class DeployedConsumer:
    function: FunctionSpec
    source: EventSourceSpec
    logical_id: str


@dataclass(frozen=True)
class DeployedStreamFunction:
    function: FunctionSpec
    source: StreamSourceSpec
    logical_id: str


def physical_ids(stack_name: str, cdk_out: Path | None = None) -> dict[str, tuple[str, str]]:
    """Logical id -> (resource type, physical id) for every resource of the stack; not deployed, an error that names
    the stacks of ``cdk_out`` that are."""
    cloudformation = boto3.client("cloudformation")
    try:
        resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
    except cloudformation.exceptions.ClientError as error:
        hint = "" if cdk_out is None else _deployed_here(cloudformation, cdk_out)
        raise StackNotFound(f"stack {stack_name!r} is not deployed here: {error}{hint}") from None
    return {
        r["LogicalResourceId"]: (r["ResourceType"], r["PhysicalResourceId"])
        for r in resources
        if "LogicalResourceId" in r and "PhysicalResourceId" in r
    }


def _deployed_here(cloudformation: Any, cdk_out: Path) -> str:
    synthesized = stacks_in(cdk_out)
    try:
        deployed = {s["StackName"] for s in cloudformation.describe_stacks()["Stacks"]
                    if not s.get("StackStatus", "").startswith("DELETE")}
    except (BotoCoreError, ClientError):
        return ""
    runnable = [name for name in synthesized if name in deployed]
    if not runnable:
        return f"; none of the stacks in {cdk_out} is deployed here: deploy one first (`cdk deploy`)"
    pick = f"--stack {runnable[0]}" if len(runnable) == 1 else "--stack and one of them"
    return f"; of the stacks in {cdk_out}, {', '.join(runnable)} {'is' if len(runnable) == 1 else 'are'} " \
           f"deployed here: run with {pick}"


def stacks_in(cdk_out: Path) -> list[str]:
    """The stacks synthesized into ``cdk_out`` (a template each at its top), which a run can play once deployed."""
    suffix = ".template.json"
    return sorted(path.name.removesuffix(suffix) for path in cdk_out.glob(f"*{suffix}")) if cdk_out.is_dir() else []


def read_template(stack_name: str, cdk_out: Path) -> dict[str, Any]:
    """The stack's template as synthesized; a missing one names the stacks ``cdk_out`` does hold."""
    template_path = cdk_out / f"{stack_name}.template.json"
    if template_path.is_file():
        return dict(json.loads(template_path.read_text()))
    synthesized = stacks_in(cdk_out)
    if not synthesized:
        raise StackNotFound(f"{template_path} is missing: synthesize or deploy the stack first")
    pick = f"--stack {synthesized[0]}" if len(synthesized) == 1 else "--stack and one of them"
    raise StackNotFound(f"{template_path} is missing: the stacks synthesized in {cdk_out} are "
                        f"{', '.join(synthesized)}; run with {pick}, or synthesize and deploy {stack_name} first")


def read_functions(stack_name: str, cdk_out: Path) -> list[tuple[str, FunctionSpec, list[dict[str, Any]]]]:
    """Each function of the stack: its logical id, its spec (code from cdk.out) and its event source mappings."""
    template = read_template(stack_name, cdk_out)
    lambda_client = boto3.client("lambda")
    found = []
    for logical_id, (kind, physical) in physical_ids(stack_name, cdk_out).items():
        if kind != "AWS::Lambda::Function":
            continue
        config = lambda_client.get_function_configuration(FunctionName=physical)
        function = FunctionSpec(
            name=config["FunctionName"],
            handler=config["Handler"],
            code_dir=_asset_dir(template["Resources"][logical_id], cdk_out),
            environment=config.get("Environment", {}).get("Variables", {}),
            timeout_s=float(config["Timeout"]),
            memory_mb=int(config.get("MemorySize", 128)),
            arn=config["FunctionArn"],
        )
        mappings = lambda_client.list_event_source_mappings(FunctionName=physical)["EventSourceMappings"]
        found.append((logical_id, function, mappings))
    return found


def read_event_sources(stack_name: str, cdk_out: Path,
                       found: list[tuple[str, FunctionSpec, list[dict[str, Any]]]] | None = None,
                       ) -> tuple[list[DeployedConsumer], list[DeployedStreamFunction]]:
    """The stack's SQS-triggered functions and its DynamoDB-stream-triggered ones (an outbox relay, the outcome
    publisher), with their event source settings (of ``found``, its functions read already, when given)."""
    sqs = boto3.client("sqs")
    consumers, streams = [], []
    for logical_id, function, mappings in found if found is not None else read_functions(stack_name, cdk_out):
        for mapping in mappings:
            arn = mapping["EventSourceArn"]
            if arn.startswith("arn:aws:sqs:"):
                consumers.append(DeployedConsumer(function, _queue_source(sqs, mapping), logical_id))
            elif ":dynamodb:" in arn and "/stream/" in arn:
                streams.append(DeployedStreamFunction(function, _stream_source(mapping), logical_id))
    return consumers, streams


def _queue_source(sqs: Any, mapping: dict[str, Any]) -> EventSourceSpec:
    arn = mapping["EventSourceArn"]
    return EventSourceSpec(
        queue_url=sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"],
        queue_arn=arn,
        batch_size=int(mapping.get("BatchSize", 10)),
        max_concurrency=int(mapping.get("ScalingConfig", {}).get("MaximumConcurrency", DEFAULT_MAX_CONCURRENCY)),
        report_batch_item_failures="ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", []),
    )


def _stream_source(mapping: dict[str, Any]) -> StreamSourceSpec:
    return StreamSourceSpec(
        stream_arn=mapping["EventSourceArn"],
        batch_size=int(mapping.get("BatchSize", 100)),
        insert_only=_event_names(mapping) == {"INSERT"},
        report_batch_item_failures="ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", []),
    )


def _event_names(mapping: dict[str, Any]) -> set[str] | None:
    """The stream event names a mapping's filter lets through (the outbox relay's: INSERT; the outcome
    publisher's: INSERT and MODIFY), or None when it has no filter on them."""
    names: set[str] = set()
    for entry in mapping.get("FilterCriteria", {}).get("Filters", []):
        pattern = entry.get("Pattern")
        values = (json.loads(pattern) if isinstance(pattern, str) else pattern or {}).get("eventName")
        if isinstance(values, list):
            names.update(str(value) for value in values)
    return names or None


def _asset_dir(resource: dict[str, Any], cdk_out: Path) -> Path:
    key = resource["Properties"]["Code"].get("S3Key")
    if not isinstance(key, str):
        raise StackNotFound("the function's code is not a file asset of this cloud assembly")
    directory = cdk_out / f"asset.{key.removesuffix('.zip')}"
    if not directory.is_dir():
        raise StackNotFound(f"the function's code asset {directory} is missing from {cdk_out}")
    return directory
