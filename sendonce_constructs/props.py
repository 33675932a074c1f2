"""The pipeline's props, resolved once: the defaults filled in and every rule checked, before anything is built.

Values that are unresolved tokens keep their place and skip the rules that would need them (see ``rules``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

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
from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S

from . import rules

# How long a dead worker's send waits for SES's events before the delivery policy decides it. SES publishes a Send
# event as it accepts an email and EventBridge delivers in about a second, retrying a failing target for up to
# 24 hours: five minutes covers normal delivery many times over, and keeps a crashed email at most minutes late.
DEFAULT_EVIDENCE_GRACE = Duration.minutes(5)


def seconds(duration: Duration | None) -> float | None:
    if duration is None or duration.is_unresolved():
        return None
    return duration.to_seconds()


Known = TypeVar("Known", str, float)


def known(value: Known | None) -> Known | None:
    """``value``, or None when it is absent or a token resolved only at deploy time (no rule can check it)."""
    return None if value is None or Token.is_unresolved(value) else value


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
    """Every prop of ``SendOnceEmailQueue`` with its default applied, checked against the rules."""

    sender: str | ses.IEmailIdentity
    sender_name: str | None  # the identity's name, when known at synth
    from_addresses: Sequence[str] | None
    configuration_set: str | ses.IConfigurationSet | None
    template_names: Sequence[str]
    allow_raw_messages: bool
    function_timeout: Duration
    memory_size: int
    architecture: lambda_.Architecture
    runtime: lambda_.Runtime
    log_retention: logs.RetentionDays
    tracing: lambda_.Tracing | None
    visibility_timeout: Duration | None
    batch_size: int
    max_batching_window: Duration | None
    max_concurrency: int | None
    parallelism: int | None
    max_send_rate: float | None  # per instance: given, or send_rate / max_concurrency
    max_receive_count: int
    retention_period: Duration
    dedupe_ttl: Duration
    delivery: DeliveryPolicy
    ses_events: bool
    evidence_grace_period: Duration | None  # with ses_events
    fifo: bool
    existing_table: dynamodb.ITable | None
    table_removal_policy: RemovalPolicy
    deletion_protection: bool | None
    queue_encryption: sqs.QueueEncryption
    encryption_key: kms.IKey | None
    alarms: bool
    alarm_topic: sns.ITopic | None
    oldest_message_alarm_threshold: Duration
    dashboard: bool
    outbox: bool
    vpc: ec2.IVpc | None
    vpc_subnets: ec2.SubnetSelection | None
    security_groups: Sequence[ec2.ISecurityGroup] | None
    reserved_concurrent_executions: int | None
    log_level: lambda_.ApplicationLogLevel
    queue_removal_policy: RemovalPolicy
    log_removal_policy: RemovalPolicy
    enabled: bool
    dead_letter_queue: sqs.IQueue | None
    suppression_reasons: ses.SuppressionReasons | None
    disable_suppression_list: bool
    outcome_events: bool
    outcome_events_skipped: bool  # left off by default: the existing table has no stream (a warning says so)
    outcome_bus: events.IEventBus | None
    low_max_receive_count: bool  # below AWS's recommended 5: a warning the user may acknowledge
    quota_watch: bool
    quota_alarm_threshold: float  # percent of SES's 24-hour quota
    key_privacy: bool = False  # keys travel as their keyed digest outside the job body
    allowed_recipients: AllowedRecipients | None = None  # a stage's only recipients; None allows every one


def resolve_props(
    *,
    sender: str | ses.IEmailIdentity,
    from_addresses: Sequence[str] | None,
    configuration_set: str | ses.IConfigurationSet | None,
    template_names: Sequence[str] | None,
    allow_raw_messages: bool,
    function_timeout: Duration | None,
    memory_size: int | None,
    architecture: lambda_.Architecture | None,
    runtime: lambda_.Runtime | None,
    log_retention: logs.RetentionDays | None,
    tracing: lambda_.Tracing | None,
    visibility_timeout: Duration | None,
    batch_size: int | None,
    max_batching_window: Duration | None,
    max_concurrency: int | None,
    parallelism: int | None,
    max_send_rate: float | None,
    send_rate: float | None,
    max_receive_count: int | None,
    retention_period: Duration | None,
    dedupe_ttl: Duration | None,
    delivery: DeliveryPolicy,
    ses_events: bool,
    evidence_grace_period: Duration | None,
    fifo: bool,
    existing_table: dynamodb.ITable | None,
    removal_policy: RemovalPolicy | None,
    deletion_protection: bool | None,
    encryption: sqs.QueueEncryption | None,
    encryption_key: kms.IKey | None,
    alarms: bool,
    alarm_topic: sns.ITopic | None,
    oldest_message_alarm_threshold: Duration | None,
    dashboard: bool,
    outbox: bool,
    vpc: ec2.IVpc | None,
    vpc_subnets: ec2.SubnetSelection | None,
    security_groups: Sequence[ec2.ISecurityGroup] | None,
    reserved_concurrent_executions: int | None,
    log_level: lambda_.ApplicationLogLevel | None,
    queue_removal_policy: RemovalPolicy | None,
    log_removal_policy: RemovalPolicy | None,
    enabled: bool,
    dead_letter_queue: sqs.IQueue | None,
    outcome_events: bool | None,
    outcome_bus: events.IEventBus | None,
    suppression_reasons: ses.SuppressionReasons | None,
    disable_suppression_list: bool,
    key_privacy: bool = False,
    allowed_recipients: Sequence[str] | None = None,
    quota_watch: bool = True,
    quota_alarm_threshold: float | None = None,
) -> PipelineProps:
    function_timeout = function_timeout or Duration.seconds(30)
    batch_size = 10 if batch_size is None else batch_size
    max_receive_count = 5 if max_receive_count is None else max_receive_count
    retention_period = retention_period or Duration.days(4)
    if dedupe_ttl is None:
        dedupe_ttl = Duration.seconds(DEFAULT_DEDUPE_TTL_S)
        if outbox and seconds(retention_period) is not None:
            minimum_s = rules.outbox_minimum_dedupe_ttl_s(retention_period.to_seconds())
            dedupe_ttl = Duration.days(max(DEFAULT_DEDUPE_TTL_S // 86_400, -(-int(minimum_s) // 86_400)))
    batching_window_s = seconds(max_batching_window) if max_batching_window else 0.0
    if parallelism is None and known(batch_size) is not None:
        parallelism = min(batch_size, 10)
    sender_name = known(sender if isinstance(sender, str) else sender.email_identity_name)

    rules.check_function_timeout(seconds(function_timeout))
    if visibility_timeout is None and seconds(function_timeout) is not None and batching_window_s is not None:
        visibility_timeout = Duration.seconds(
            rules.minimum_visibility_timeout_s(function_timeout.to_seconds(), batching_window_s)
        )
    rules.check_visibility_timeout(seconds(visibility_timeout), seconds(function_timeout), batching_window_s)
    rules.check_batching(known(batch_size), batching_window_s if max_batching_window else None, fifo)
    rules.check_max_concurrency(known(max_concurrency))
    rules.check_parallelism(known(parallelism), known(batch_size))
    rules.check_max_send_rate(known(max_send_rate))
    rules.check_send_rate(known(send_rate), max_send_rate is not None, known(max_concurrency),
                          max_concurrency is not None)
    pipeline_rate, instances = known(send_rate), known(max_concurrency)
    if pipeline_rate is not None and instances is not None:
        max_send_rate = pipeline_rate / instances
    low_max_receive_count = rules.check_max_receive_count(known(max_receive_count))
    rules.check_retention_period(seconds(retention_period))
    rules.check_dedupe_ttl(seconds(dedupe_ttl), seconds(retention_period))
    if outbox:
        rules.check_outbox_dedupe_ttl(seconds(dedupe_ttl), seconds(retention_period))
    rules.check_memory_size(known(memory_size))
    if ses_events:
        evidence_grace_period = evidence_grace_period or DEFAULT_EVIDENCE_GRACE
        rules.check_evidence_grace_period(seconds(evidence_grace_period), seconds(visibility_timeout),
                                          seconds(retention_period), known(max_receive_count))
    elif evidence_grace_period is not None:
        rules.evidence_grace_period_without_events()
    if isinstance(sender, str):
        rules.check_sender(sender)
    if from_addresses is not None:
        rules.check_from_addresses(from_addresses, sender_name)
    table_overrides = [name for name, value in (("removal_policy", removal_policy),
                                                ("deletion_protection", deletion_protection)) if value is not None]
    rules.check_table_choice(existing_table is not None, table_overrides)
    if existing_table is not None:
        schema = _key_schema(existing_table)
        if schema is not None:
            rules.check_existing_table_keys(*schema)
    rules.check_encryption(encryption.name if encryption else None, encryption_key is not None)
    rules.check_reserved_concurrency(known(reserved_concurrent_executions), known(max_concurrency))
    rules.check_vpc_choice(vpc is not None, [name for name, value in (("vpc_subnets", vpc_subnets),
                                                                      ("security_groups", security_groups))
                                             if value is not None])
    if dead_letter_queue is not None:
        rules.check_dead_letter_queue(_fifo_of(dead_letter_queue), fifo)
        rules.check_dead_letter_queue_retention(_retention_of(dead_letter_queue))
    rules.check_suppression(suppression_reasons is not None, disable_suppression_list,
                            ses_events and configuration_set is None)
    table_has_stream = None if existing_table is None else existing_table.table_stream_arn is not None
    outcome_events_on = rules.check_outcome_events(outcome_events, outcome_bus is not None, table_has_stream)
    rules.check_template_names([name for name in template_names or [] if known(name) is not None])
    allowed = rules.check_allowed_recipients(allowed_recipients)
    rules.check_quota_alarm_threshold(known(quota_alarm_threshold))

    return PipelineProps(
        sender=sender, sender_name=sender_name, from_addresses=from_addresses, configuration_set=configuration_set,
        template_names=template_names or [], allow_raw_messages=allow_raw_messages,
        function_timeout=function_timeout, memory_size=memory_size or 256,
        architecture=architecture or lambda_.Architecture.ARM_64, runtime=runtime or newest_python_runtime(),
        log_retention=log_retention or logs.RetentionDays.ONE_MONTH, tracing=tracing,
        visibility_timeout=visibility_timeout, batch_size=batch_size, max_batching_window=max_batching_window,
        max_concurrency=max_concurrency, parallelism=parallelism, max_send_rate=max_send_rate,
        max_receive_count=max_receive_count, retention_period=retention_period, dedupe_ttl=dedupe_ttl,
        delivery=delivery, ses_events=ses_events, evidence_grace_period=evidence_grace_period, fifo=fifo,
        existing_table=existing_table, table_removal_policy=removal_policy or RemovalPolicy.RETAIN,
        deletion_protection=deletion_protection,
        queue_encryption=encryption or (
            sqs.QueueEncryption.KMS if encryption_key is not None else sqs.QueueEncryption.SQS_MANAGED),
        encryption_key=encryption_key, alarms=alarms, alarm_topic=alarm_topic,
        oldest_message_alarm_threshold=oldest_message_alarm_threshold or Duration.minutes(15), dashboard=dashboard,
        outbox=outbox, vpc=vpc, vpc_subnets=vpc_subnets, security_groups=security_groups,
        reserved_concurrent_executions=reserved_concurrent_executions,
        log_level=log_level or lambda_.ApplicationLogLevel.INFO,
        queue_removal_policy=queue_removal_policy or RemovalPolicy.RETAIN,
        log_removal_policy=log_removal_policy or RemovalPolicy.DESTROY, enabled=enabled,
        dead_letter_queue=dead_letter_queue, suppression_reasons=suppression_reasons,
        disable_suppression_list=disable_suppression_list, outcome_events=outcome_events_on,
        outcome_events_skipped=outcome_events is None and not outcome_events_on, outcome_bus=outcome_bus,
        low_max_receive_count=low_max_receive_count, key_privacy=key_privacy, allowed_recipients=allowed,
        quota_watch=quota_watch,
        quota_alarm_threshold=(rules.DEFAULT_QUOTA_ALARM_PERCENT if quota_alarm_threshold is None
                               else quota_alarm_threshold),
    )


def _fifo_of(queue: sqs.IQueue) -> bool | None:
    """Whether a queue given is FIFO; None when CDK cannot tell (an imported queue without the .fifo name)."""
    fifo = getattr(queue, "fifo", None)
    return fifo if isinstance(fifo, bool) else None


def _retention_of(queue: sqs.IQueue) -> float | None:
    """How long a queue defined in this app keeps messages (SQS's default 4 days when unset); None for an imported
    queue or a token."""
    cfn = queue.node.default_child if isinstance(queue, sqs.Queue) else None
    if not isinstance(cfn, sqs.CfnQueue):
        return None
    retention = cfn.message_retention_period
    if retention is None:
        return float(SQS_DEFAULT_RETENTION_S)
    return float(retention) if known(float(retention)) is not None else None


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
