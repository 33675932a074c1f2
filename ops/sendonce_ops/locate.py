"""Finds a pipeline's table and queues: from explicit names, or from a deployed stack's outputs or resources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

# The construct's outputs say which pipeline and which part they are: "sendonce:<pipeline path>:<part>".
from sendonce_contract.stack_names import OUTPUT_PREFIX, ChildId, OutputPart

# What each part's logical id contains, for stacks whose outputs the endpoint does not return.
LOGICAL_MARKERS = {OutputPart.TABLE: ("AWS::DynamoDB::Table", ChildId.DEDUPE_TABLE),
                   OutputPart.QUEUE: ("AWS::SQS::Queue", ChildId.QUEUE),
                   OutputPart.DLQ: ("AWS::SQS::Queue", ChildId.DEAD_LETTER_QUEUE),
                   OutputPart.KEY_SECRET: ("AWS::SecretsManager::Secret", ChildId.KEY_SECRET),
                   OutputPart.URGENT_QUEUE: ("AWS::SQS::Queue", ChildId.URGENT_QUEUE),
                   OutputPart.URGENT_DLQ: ("AWS::SQS::Queue", ChildId.URGENT_DEAD_LETTER_QUEUE)}


class LocateError(LookupError):
    pass


@dataclass(frozen=True)
class Pipeline:
    table: str | None
    queue_url: str | None
    dead_letter_queue_url: str | None
    dedupe_ttl_s: int | None = None  # the stack's dedupe_ttl: `dlq redrive` skips jobs whose key is forgotten
    key_secret: str | None = None  # with key_privacy: the secret that digests a clear key into the record's key
    name: str | None = None  # the construct's path in its stack, when found there
    outbox_table: str | None = None
    evidence_grace_s: int | None = None  # the stack's evidence_grace_period, with ses_events
    attachments_bucket: str | None = None  # with attachments_bucket: where producers put claim-checked files
    urgent_queue_url: str | None = None  # with urgent_lane
    urgent_dead_letter_queue_url: str | None = None

    def need(self, part: str) -> str:
        value = {"table": self.table, "queue": self.queue_url, "dlq": self.dead_letter_queue_url,
                 "urgent-dlq": self.urgent_dead_letter_queue_url}[part]
        if not value:
            if part == "urgent-dlq":
                raise LocateError(f"pipeline {self.name or '-'} has no urgent lane (deploy it with urgent_lane=True),"
                                  " or pass --stack")
            flag = {"table": "--table", "queue": "--queue", "dlq": "--dlq"}[part]
            where = f"pipeline {self.name} has no {part} output" if self.name else f"no {part} found"
            raise LocateError(f"{where}: pass {flag}" + ("" if self.name else " or --stack"))
        return value


def locate(cloudformation: Any, stack: str | None, pipeline: str | None, table: str | None, queue: str | None,
           dlq: str | None) -> Pipeline:
    found: dict[str, str] = {}
    name = None
    if stack:
        name, found = _from_outputs(cloudformation, stack, pipeline) or _from_resources(cloudformation, stack,
                                                                                          pipeline)
    ttl, grace = found.get(OutputPart.DEDUPE_TTL), found.get(OutputPart.EVIDENCE_GRACE)
    return Pipeline(table or found.get(OutputPart.TABLE), queue or found.get(OutputPart.QUEUE),
                    dlq or found.get(OutputPart.DLQ), int(ttl) if ttl and ttl.isdigit() else None,
                    found.get(OutputPart.KEY_SECRET), name, found.get(OutputPart.OUTBOX),
                    int(grace) if grace and grace.isdigit() else None, found.get(OutputPart.ATTACHMENTS),
                    found.get(OutputPart.URGENT_QUEUE), found.get(OutputPart.URGENT_DLQ))


Found = tuple[str | None, dict[str, str]]


def _from_outputs(cloudformation: Any, stack: str, pipeline: str | None) -> Found | None:
    try:
        stacks = cloudformation.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as error:
        raise LocateError(f"stack {stack!r} not found ({error.response['Error'].get('Message', error)})") from None
    by_pipeline: dict[str, dict[str, str]] = {}
    for output in stacks[0].get("Outputs") or []:
        description = output.get("Description", "")
        if not description.startswith(OUTPUT_PREFIX):
            continue
        path, _, part = description[len(OUTPUT_PREFIX):].rpartition(":")
        by_pipeline.setdefault(path, {})[part] = output["OutputValue"]
    return _choose(by_pipeline, pipeline, stack) if by_pipeline else None


def _from_resources(cloudformation: Any, stack: str, pipeline: str | None) -> Found:
    resources = cloudformation.describe_stack_resources(StackName=stack)["StackResources"]
    by_pipeline: dict[str, dict[str, str]] = {}
    for part, (kind, marker) in LOGICAL_MARKERS.items():
        for resource in resources:
            logical = resource.get("LogicalResourceId", "")
            if resource.get("ResourceType") != kind or marker not in logical:
                continue
            prefix = logical.split(marker)[0]
            if part == "queue" and logical.split(marker)[0].endswith("DeadLetter"):
                continue
            by_pipeline.setdefault(prefix, {})[part] = resource["PhysicalResourceId"]
    with_queue = {k: v for k, v in by_pipeline.items() if "queue" in v}
    # A pipeline's sub-construct (its SES evidence queue) shares its prefix: it is part of it, not a pipeline.
    pipelines = {k: v for k, v in with_queue.items() if not any(k != o and k.startswith(o) for o in with_queue)}
    return _choose(pipelines, pipeline, stack)


def _choose(by_pipeline: dict[str, dict[str, str]], pipeline: str | None, stack: str) -> Found:
    """The pipeline named by its construct id or its path (``Shop/Receipts``), or the only one."""
    names = ", ".join(sorted(by_pipeline)) or "none"
    if pipeline is not None:
        wanted = pipeline.strip("/")
        matches = {k: v for k, v in by_pipeline.items() if wanted in (k, k.split("/")[-1])}
        if not matches:
            raise LocateError(f"stack {stack!r} has no sendonce pipeline {pipeline!r}; it has: {names}")
    else:
        matches = by_pipeline
    if len(matches) > 1:
        raise LocateError(f"stack {stack!r} has several sendonce pipelines ({names}): pick one with --pipeline "
                          "(its construct id or path)")
    if not matches:
        raise LocateError(f"stack {stack!r} has no sendonce pipeline")
    return next(iter(matches.items()))
