"""The props of ``SendOnceEmailQueue`` as the pipeline is built with them: every prop declared in
``queue_props``, with its default filled in or derived and the rules checked, then the facts found besides them
(``derivations.FACTS``).

Rendered from the declarations by ``make props-docs``: edit those, not this (a test fails while they differ). A
prop's type is its declared type, without None when it has a default; a derived prop's, its derivation's return
type; a prop a rule parses, that rule's return type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs

from sendonce_contract.allowed_recipients import AllowedRecipients
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.mis_keyed import OnSuspectedDouble

from .lane_rates import LaneRates
from .unresolved import SynthPython, Unresolved


@dataclass(frozen=True)
class PipelineProps:
    """Every prop of ``SendOnceEmailQueue`` as built, and the facts found (``props.resolve_props``)."""

    given: frozenset[str]  # the names of the props given (the rest took their default or derivation)
    sender: str | ses.IEmailIdentity
    from_addresses: Sequence[str] | None
    configuration_set: str | ses.IConfigurationSet | None
    ses_events: bool
    evidence_grace_period: Duration | None
    template_names: Sequence[str]
    allow_raw_messages: bool
    function_timeout: Duration
    memory_size: int
    architecture: lambda_.Architecture
    runtime: lambda_.Runtime
    precompiled_bytecode: bool
    log_retention: logs.RetentionDays
    tracing: lambda_.Tracing | None
    visibility_timeout: Duration | None
    max_batching_window: Duration | None
    max_concurrency: int | None
    send_rate: float | None
    max_send_rate: float | None
    batch_size: int
    parallelism: int | None
    urgent_lane: bool
    urgent_share: float
    max_job_age: Duration | None
    urgent_max_job_age: Duration | None
    max_delivery_duration: Duration | None
    urgent_max_delivery_duration: Duration | None
    provisioned_pollers: lambda_.ProvisionedPollerConfig | None
    urgent_provisioned_pollers: lambda_.ProvisionedPollerConfig | None
    max_receive_count: int
    retention_period: Duration
    max_message_size_bytes: int | None
    dedupe_ttl: Duration
    delivery: DeliveryPolicy
    fifo: bool
    existing_table: dynamodb.ITable | None
    removal_policy: RemovalPolicy
    deletion_protection: bool | None
    encryption: sqs.QueueEncryption
    encryption_key: kms.IKey | None
    alarms: bool
    alarm_topic: sns.ITopic | None
    oldest_message_alarm_threshold: Duration
    urgent_oldest_message_alarm_threshold: Duration
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
    key_privacy: bool
    ses_tenants: bool
    tenant_metrics: bool
    allowed_recipients: AllowedRecipients | None
    suspected_doubles: OnSuspectedDouble | None
    recipient_cap: int | None
    guard_window: Duration
    waiting_room: bool
    quota_watch: bool
    quota_alarm_threshold: float
    attachments_bucket: bool | s3.IBucket
    outbox: bool
    sender_name: str | Unresolved
    synth_python: SynthPython
    outcome_events_skipped: bool
    low_max_receive_count: bool
    lane_rates: LaneRates | None
    paced_concurrency: int | None
    attachments_expiry_days: int | Unresolved | None
    attachments_lifetime: str | None
