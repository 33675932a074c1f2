"""The pipeline's props, resolved once: the declared defaults filled in (``queue_props``), the derived ones
computed, and every rule checked, before anything is built.

Values that are unresolved tokens keep their place; the rules see them as ``UNRESOLVED`` and skip what would
need them (see ``rules``).
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs

from sendonce_contract.allowed_recipients import AllowedRecipients
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S, DEFAULT_EVIDENCE_GRACE_S

from . import rules
from .errors import ID_PREFIX, SendOnceConfigurationError
from .prop_types import check_types
from .queue_props import DERIVED, REQUIRED, Prop, declared_props, declared_types
from .unresolved import UNRESOLVED, Number, Unresolved, is_known

DEFAULT_EVIDENCE_GRACE = Duration.seconds(DEFAULT_EVIDENCE_GRACE_S)


def seconds(duration: Duration | None) -> float | None:
    """For the consumer's environment: seconds, or None when absent or a token."""
    if duration is None or duration.is_unresolved():
        return None
    return duration.to_seconds()


Known = TypeVar("Known", str, float)


def known(value: Known | None) -> Known | None:
    """For the consumer's environment: ``value``, or None when it is absent or a token resolved only at deploy."""
    return None if value is None or Token.is_unresolved(value) else value


Read = TypeVar("Read", str, float)


def read(value: Read | None) -> Read | Unresolved | None:
    """A value as the rules see it: None when absent, ``UNRESOLVED`` when a token."""
    if value is None:
        return None
    return UNRESOLVED if Token.is_unresolved(value) else value


def read_seconds(duration: Duration | None) -> float | Unresolved | None:
    """A duration in seconds as the rules see it: None when absent, ``UNRESOLVED`` when a token."""
    if duration is None:
        return None
    return UNRESOLVED if duration.is_unresolved() else duration.to_seconds()


def newest_python_runtime() -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib knows (what cdk-nag's AwsSolutions-L1 asks for)."""
    versions = [
        (tuple(int(part) for part in name.split("_")[1:]), name)
        for name in dir(lambda_.Runtime)
        if re.fullmatch(r"PYTHON_3_\d+", name)
    ]
    runtime: lambda_.Runtime = getattr(lambda_.Runtime, max(versions)[1])
    return runtime


@dataclass(frozen=True)
class PipelineProps:
    """Every prop of ``SendOnceEmailQueue`` (named as declared in ``queue_props``) with its default applied and the
    rules checked, and what the rules found. A test holds its fields to the declarations."""

    sender: str | ses.IEmailIdentity
    from_addresses: Sequence[str] | None
    configuration_set: str | ses.IConfigurationSet | None
    ses_events: bool
    evidence_grace_period: Duration | None  # with ses_events
    template_names: Sequence[str]
    allow_raw_messages: bool
    function_timeout: Duration
    memory_size: int
    architecture: lambda_.Architecture
    runtime: lambda_.Runtime
    precompiled_bytecode: bool
    log_retention: logs.RetentionDays
    tracing: lambda_.Tracing | None
    visibility_timeout: Duration | None  # None when the function timeout is a token: the queue's own default
    batch_size: int
    max_batching_window: Duration | None
    max_concurrency: int | None
    parallelism: int | None
    send_rate: float | None
    max_send_rate: float | None  # per instance: given, or send_rate / max_concurrency
    max_receive_count: int
    retention_period: Duration
    dedupe_ttl: Duration
    delivery: DeliveryPolicy
    fifo: bool
    existing_table: dynamodb.ITable | None
    removal_policy: RemovalPolicy  # of the tables the construct makes
    deletion_protection: bool | None
    encryption: sqs.QueueEncryption
    encryption_key: kms.IKey | None
    alarms: bool
    alarm_topic: sns.ITopic | None
    oldest_message_alarm_threshold: Duration
    dashboard: bool
    vpc: ec2.IVpc | None
    vpc_subnets: ec2.SubnetSelection | None
    security_groups: Sequence[ec2.ISecurityGroup] | None
    reserved_concurrent_executions: int | None
    log_level: lambda_.ApplicationLogLevel
    queue_removal_policy: RemovalPolicy
    log_removal_policy: RemovalPolicy
    enabled: bool
    dead_letter_queue: sqs.IQueue | None
    outcome_events: bool
    outcome_bus: events.IEventBus | None
    suppression_reasons: ses.SuppressionReasons | None
    disable_suppression_list: bool
    key_privacy: bool  # keys travel as their keyed digest outside the job body
    allowed_recipients: AllowedRecipients | None  # a stage's only recipients; None allows every one
    quota_watch: bool
    quota_alarm_threshold: float  # percent of SES's 24-hour quota
    outbox: bool
    # What the rules found, besides the props:
    sender_name: str | Unresolved  # the identity's name
    outcome_events_skipped: bool  # left off by default: the existing table has no stream (a warning says so)
    low_max_receive_count: bool  # below AWS's recommended 5: a warning the user may acknowledge


def resolve_props(given: Mapping[str, object], path: str) -> PipelineProps:
    """The props given (``SendOnceEmailQueueProps``; None is the same as absent) with the declared defaults filled
    in, the derived ones computed and every rule applied; an error names the construct at ``path``."""
    try:
        return _resolve({name: value for name, value in given.items() if value is not None})
    except SendOnceConfigurationError as error:
        raise error.at(path) from None


def _resolve(given: Mapping[str, Any]) -> PipelineProps:
    declared = declared_props()
    check_declared(given, declared)
    check_types(given, declared_types())
    v = {name: given.get(name, prop.default) for name, prop in declared.items() if prop.default is not DERIVED}
    # The derived defaults, each from the props it follows.
    window_s = read_seconds(v["max_batching_window"]) if v["max_batching_window"] else 0.0
    timeout_s, retention_s = read_seconds(v["function_timeout"]), read_seconds(v["retention_period"])
    v["runtime"] = given.get("runtime") or newest_python_runtime()
    v["visibility_timeout"] = given.get("visibility_timeout") or (
        Duration.seconds(rules.minimum_visibility_timeout_s(timeout_s, window_s))
        if is_known(timeout_s) and is_known(window_s) else None)
    v["dedupe_ttl"] = given.get("dedupe_ttl") or _default_dedupe_ttl(v["outbox"], retention_s)
    v["parallelism"] = given["parallelism"] if "parallelism" in given else (
        min(v["batch_size"], 10) if is_known(read(v["batch_size"])) else None)
    v["encryption"] = given.get("encryption") or (
        sqs.QueueEncryption.KMS if v["encryption_key"] is not None else sqs.QueueEncryption.SQS_MANAGED)
    v["evidence_grace_period"] = given.get("evidence_grace_period") or (
        DEFAULT_EVIDENCE_GRACE if v["ses_events"] else None)
    send_rate, max_concurrency = read(v["send_rate"]), read(v["max_concurrency"])
    v["max_send_rate"] = (send_rate / max_concurrency if is_known(send_rate) and is_known(max_concurrency)
                          else given.get("max_send_rate"))
    sender = v["sender"]
    v["sender_name"] = read(sender if isinstance(sender, str) else sender.email_identity_name)
    found = _apply_rules(given, v, window_s, timeout_s, retention_s)
    return PipelineProps(**{**v, **found})


def check_declared(given: Mapping[str, object], declared: Mapping[str, Prop]) -> None:
    """Every prop given is declared (a typo is an error, not a prop silently ignored); every required one given."""
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"did you mean {close[0]}?" if close else "see the props reference (https://sendonce.github.io/sendonce/reference/props/)"
            raise SendOnceConfigurationError(f"{name} is not a prop of SendOnceEmailQueue; {hint}",
                                             f"{ID_PREFIX}UnknownProp")
    for name, prop in declared.items():
        if prop.default is REQUIRED and name not in given:
            raise SendOnceConfigurationError(f"{name} is required: {prop.doc}", f"{ID_PREFIX}MissingProp")


def _as_rules_see(value: Any) -> Number:
    return read_seconds(value) if isinstance(value, Duration) else read(value)


def _default_dedupe_ttl(outbox: bool, retention_s: float | Unresolved | None) -> Duration:
    # With an outbox the key must outlive the stream, the queue and the DLQ: whole days, at least the 7-day default.
    if outbox and is_known(retention_s):
        minimum_s = rules.outbox_minimum_dedupe_ttl_s(retention_s)
        return Duration.days(max(DEFAULT_DEDUPE_TTL_S // 86_400, -(-int(minimum_s) // 86_400)))
    return Duration.seconds(DEFAULT_DEDUPE_TTL_S)


def _apply_rules(given: Mapping[str, Any], v: Mapping[str, Any], window_s: float | Unresolved | None,
                 timeout_s: float | Unresolved | None, retention_s: float | Unresolved | None) -> dict[str, Any]:
    """Every rule, on the values as they will be built; returns what the rules found besides the props."""
    batch_size, max_concurrency = read(v["batch_size"]), read(v["max_concurrency"])
    max_receive_count, visibility_s = read(v["max_receive_count"]), read_seconds(v["visibility_timeout"])
    dedupe_ttl_s = read_seconds(v["dedupe_ttl"])
    existing_table, dead_letter_queue = v["existing_table"], v["dead_letter_queue"]

    for name, prop in declared_props().items():
        if prop.check is not None and name in given:
            prop.check(_as_rules_see(given[name]))
    rules.check_visibility_timeout(visibility_s, timeout_s, window_s)
    rules.check_batching(batch_size, read_seconds(given.get("max_batching_window")), v["fifo"])
    rules.check_parallelism(read(v["parallelism"]), batch_size)
    rules.check_send_rate(read(v["send_rate"]), read(given.get("max_send_rate")), max_concurrency)
    low_max_receive_count = rules.check_max_receive_count(max_receive_count)
    rules.check_dedupe_ttl(dedupe_ttl_s, retention_s)
    if v["outbox"]:
        rules.check_outbox_dedupe_ttl(dedupe_ttl_s, retention_s)
    if v["ses_events"]:
        rules.check_evidence_grace_period(read_seconds(v["evidence_grace_period"]), visibility_s, retention_s,
                                          max_receive_count)
    elif "evidence_grace_period" in given:
        rules.evidence_grace_period_without_events()
    if isinstance(v["sender"], str):
        rules.check_sender(v["sender"])
    if v["from_addresses"] is not None:
        rules.check_from_addresses(v["from_addresses"], v["sender_name"])
    rules.check_table_choice(existing_table is not None,
                             [name for name in ("removal_policy", "deletion_protection") if name in given])
    if existing_table is not None:
        schema = _key_schema(existing_table)
        if schema is not None:
            rules.check_existing_table_keys(*schema)
    encryption = given.get("encryption")
    rules.check_encryption(encryption.name if encryption else None, v["encryption_key"] is not None)
    rules.check_reserved_concurrency(read(v["reserved_concurrent_executions"]), max_concurrency)
    if v["precompiled_bytecode"]:
        synth_runtime = f"PYTHON_{sys.version_info.major}_{sys.version_info.minor}"
        rules.check_precompiled_bytecode(v["runtime"].name, "runtime" in given, sys.version_info[:2],
                                         hasattr(lambda_.Runtime, synth_runtime))
    rules.check_vpc_choice(v["vpc"] is not None, [name for name in ("vpc_subnets", "security_groups") if name in given])
    if dead_letter_queue is not None:
        rules.check_dead_letter_queue(_fifo_of(dead_letter_queue), v["fifo"])
        rules.check_dead_letter_queue_retention(_retention_of(dead_letter_queue))
    rules.check_suppression(v["suppression_reasons"] is not None, v["disable_suppression_list"],
                            v["ses_events"] and v["configuration_set"] is None)
    table_has_stream = None if existing_table is None else existing_table.table_stream_arn is not None
    outcome_events = rules.check_outcome_events(given.get("outcome_events"), v["outcome_bus"] is not None,
                                                table_has_stream)
    rules.check_template_names([name for name in v["template_names"] if is_known(read(name))])
    allowed_recipients = rules.check_allowed_recipients(given.get("allowed_recipients"))
    return {"outcome_events": outcome_events, "allowed_recipients": allowed_recipients,
            "outcome_events_skipped": "outcome_events" not in given and not outcome_events,
            "low_max_receive_count": low_max_receive_count}


def _fifo_of(queue: sqs.IQueue) -> bool | None:
    """Whether a queue given is FIFO; None when CDK cannot tell (an imported queue without the .fifo name)."""
    fifo = getattr(queue, "fifo", None)
    return fifo if isinstance(fifo, bool) else None


def _retention_of(queue: sqs.IQueue) -> float | Unresolved:
    """How long a queue defined in this app keeps messages (SQS's default 4 days when unset); UNRESOLVED for an
    imported queue (CDK cannot tell) or a token."""
    cfn = queue.node.default_child if isinstance(queue, sqs.Queue) else None
    if not isinstance(cfn, sqs.CfnQueue):
        return UNRESOLVED
    retention = cfn.message_retention_period
    if retention is None:
        return float(SQS_DEFAULT_RETENTION_S)
    return UNRESOLVED if Token.is_unresolved(retention) else float(retention)


SQS_DEFAULT_RETENTION_S = 345_600
_ATTRIBUTE_TYPES = {"S": "STRING", "N": "NUMBER", "B": "BINARY"}


def _key_schema(table: dynamodb.ITable) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The key attributes of a table defined in this app (a ``Table`` or a ``TableV2``); None for an imported one,
    whose schema CDK cannot see."""
    schema_v2 = getattr(table, "schema_v2", None)
    if schema_v2 is not None:
        schema = schema_v2()
        return ([(a.name, a.type.name) for a in schema.partition_keys], [a.name for a in schema.sort_keys])
    cfn = table.node.default_child if isinstance(table, dynamodb.TableV2) else None
    if not isinstance(cfn, dynamodb.CfnGlobalTable):
        return None
    # TableV2 exposes no schema: its L1 holds the key schema, and the attribute types as a lazy list.
    definitions = Stack.of(table).resolve(cfn.attribute_definitions) or []
    types = {d["attributeName"]: _ATTRIBUTE_TYPES.get(d["attributeType"], d["attributeType"]) for d in definitions}
    keys = [(k.attribute_name, k.key_type) for k in cfn.key_schema]  # type: ignore[union-attr]
    return ([(name, types.get(name, "?")) for name, kind in keys if kind == "HASH"],
            [name for name, kind in keys if kind == "RANGE"])
