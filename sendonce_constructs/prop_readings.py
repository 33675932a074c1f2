"""The props of ``SendOnceEmailQueue`` as the rules see them (``rules``): each value read once by
``readings`` (a duration in seconds, a number or a name that is a token as ``UNRESOLVED``, a CDK object a rule
weighs as plain facts, any other CDK object as it is), then the facts found besides them (``derivations.FACTS``).

Rendered from the declarations by ``make props-docs``: edit those, not this (a test fails while they differ). CDK-free,
as the rules are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.mis_keyed import OnSuspectedDouble

from .lane_rates import LaneRates
from .unresolved import BucketFacts, Number, PollerFacts, QueueFacts, SynthPython, TableFacts, Unresolved


@dataclass(frozen=True)
class PropReadings:
    """Every prop as a rule reads it (``readings.reading``), by name, and the facts; ``given`` names the props given."""

    given: frozenset[str]  # the names of the props given (the rest took their default or derivation)
    sender: str | None
    from_addresses: Sequence[str] | None
    configuration_set: object
    ses_events: bool
    evidence_grace_period: Number
    template_names: list[str]
    allow_raw_messages: bool
    function_timeout: Number
    memory_size: Number
    architecture: object
    runtime: str
    precompiled_bytecode: bool
    log_retention: object
    tracing: object
    visibility_timeout: Number
    max_batching_window: Number
    max_concurrency: Number
    send_rate: Number
    max_send_rate: Number
    batch_size: Number
    parallelism: Number
    urgent_lane: bool
    urgent_share: Number
    max_job_age: Number
    urgent_max_job_age: Number
    max_delivery_duration: Number
    urgent_max_delivery_duration: Number
    provisioned_pollers: PollerFacts | None
    urgent_provisioned_pollers: PollerFacts | None
    max_receive_count: Number
    retention_period: Number
    max_message_size_bytes: Number
    dedupe_ttl: Number
    delivery: DeliveryPolicy
    fifo: bool
    existing_table: TableFacts | None
    removal_policy: object
    deletion_protection: bool | None
    encryption: str
    encryption_key: object
    alarms: bool
    alarm_topic: object
    oldest_message_alarm_threshold: Number
    urgent_oldest_message_alarm_threshold: Number
    dashboard: bool
    vpc: object
    vpc_subnets: object
    security_groups: object
    reserved_concurrent_executions: Number
    log_level: object
    queue_removal_policy: object
    log_removal_policy: object
    enabled: bool
    dead_letter_queue: QueueFacts | None
    outcome_events: bool
    outcome_bus: object
    suppression_reasons: object
    disable_suppression_list: bool
    key_privacy: bool
    ses_tenants: bool
    tenant_metrics: bool
    allowed_recipients: Sequence[str] | None
    suspected_doubles: OnSuspectedDouble | None
    recipient_cap: Number
    guard_window: Number
    waiting_room: bool
    quota_watch: bool
    quota_alarm_threshold: Number
    attachments_bucket: bool | BucketFacts
    outbox: bool
    sender_name: str | Unresolved
    synth_python: SynthPython
    outcome_events_skipped: bool
    low_max_receive_count: bool
    lane_rates: LaneRates | None
    paced_concurrency: int | None
    attachments_expiry_days: int | Unresolved | None
    attachments_lifetime: str | None
