"""Finds a deployed stack's SQS-triggered functions in the emulator, with their code from cdk.out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from .event_source_runner import EventSourceSpec
from .lambda_instances import FunctionSpec
from .stream_runner import StreamSourceSpec

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


def physical_ids(stack_name: str) -> dict[str, tuple[str, str]]:
    """Logical id -> (resource type, physical id) for every resource of the stack."""
    cloudformation = boto3.client("cloudformation")
    try:
        resources = cloudformation.describe_stack_resources(StackName=stack_name)["StackResources"]
    except cloudformation.exceptions.ClientError as error:
        raise StackNotFound(f"stack {stack_name!r} is not deployed here: {error}") from None
    return {
        r["LogicalResourceId"]: (r["ResourceType"], r["PhysicalResourceId"])
        for r in resources
        if "LogicalResourceId" in r and "PhysicalResourceId" in r
    }


def _functions(stack_name: str, cdk_out: Path) -> list[tuple[str, FunctionSpec, list[dict[str, Any]]]]:
    """Each function of the stack: its logical id, its spec (code from cdk.out) and its event source mappings."""
    template_path = cdk_out / f"{stack_name}.template.json"
    if not template_path.is_file():
        raise StackNotFound(f"{template_path} is missing: synthesize or deploy the stack first")
    template = json.loads(template_path.read_text())
    lambda_client = boto3.client("lambda")
    found = []
    for logical_id, (kind, physical) in physical_ids(stack_name).items():
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


def read_consumers(stack_name: str, cdk_out: Path) -> list[DeployedConsumer]:
    """The stack's SQS-triggered functions, with their event source settings."""
    sqs = boto3.client("sqs")
    consumers = []
    for logical_id, function, mappings in _functions(stack_name, cdk_out):
        for mapping in mappings:
            arn = mapping["EventSourceArn"]
            if not arn.startswith("arn:aws:sqs:"):
                continue
            source = EventSourceSpec(
                queue_url=sqs.get_queue_url(QueueName=arn.rsplit(":", 1)[-1])["QueueUrl"],
                queue_arn=arn,
                batch_size=int(mapping.get("BatchSize", 10)),
                max_concurrency=int(mapping.get("ScalingConfig", {}).get("MaximumConcurrency",
                                                                          DEFAULT_MAX_CONCURRENCY)),
                report_batch_item_failures="ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", []),
            )
            consumers.append(DeployedConsumer(function, source, logical_id))
    return consumers


def read_stream_functions(stack_name: str, cdk_out: Path) -> list[DeployedStreamFunction]:
    """The stack's DynamoDB-stream-triggered functions (an outbox relay)."""
    found = []
    for logical_id, function, mappings in _functions(stack_name, cdk_out):
        for mapping in mappings:
            arn = mapping["EventSourceArn"]
            if ":dynamodb:" not in arn or "/stream/" not in arn:
                continue
            source = StreamSourceSpec(
                stream_arn=arn,
                batch_size=int(mapping.get("BatchSize", 100)),
                insert_only=_event_names(mapping) == {"INSERT"},
                report_batch_item_failures="ReportBatchItemFailures" in mapping.get("FunctionResponseTypes", []),
            )
            found.append(DeployedStreamFunction(function, source, logical_id))
    return found


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


def physical_id_of(stack_name: str, resource_type: str, logical_prefix: str = "") -> str:
    matches = [p for lid, (kind, p) in physical_ids(stack_name).items()
               if kind == resource_type and lid.startswith(logical_prefix)]
    if len(matches) != 1:
        raise StackNotFound(f"expected one {resource_type} {logical_prefix}* in {stack_name}, found {len(matches)}")
    return matches[0]
