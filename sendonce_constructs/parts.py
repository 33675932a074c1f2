"""The parts a ``SendOnceEmailQueue`` is built from, each the constructs one builder made: a builder takes the
parts it needs as arguments and returns its own, so the order they are built in is the constructor's to read.

(The outbox's part is its ``Outbox`` construct itself.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs

from .evidence import SesEvidence
from .outcome_events import OutcomeEvents
from .quota_watch import QuotaWatch


@dataclass(frozen=True)
class Queues:
    queue: sqs.Queue
    dead_letter_queue: sqs.IQueue


@dataclass(frozen=True)
class Lane:
    """One lane's queues and what its consumer's environment says of its pace."""

    name: str  # with urgent_lane, "bulk" or "urgent" (the metrics' Lane dimension); "" without lanes
    queues: Queues
    max_concurrency: int | None
    max_send_rate: float | None
    lent_send_rate: float | None = None  # bulk only: borrowed while the urgent lane is idle (its work item)
    batch_size: int | None = None  # urgent only: its event source's, from its own pace; None: the batch_size prop
    provisioned_pollers: lambda_.ProvisionedPollerConfig | None = None


@dataclass(frozen=True)
class LedgerParts:
    """The dedupe table, the customer keys its data is under (the queues' and table's key, and an existing table's
    own: without them every claim is AccessDenied) and, with key_privacy, the key secret."""

    table: dynamodb.ITable
    data_keys: Sequence[kms.IKey]
    key_secret: secretsmanager.ISecret | None


@dataclass(frozen=True)
class Evidence:
    """SES's events (with ses_events), the outcome events (with outcome_events), and the configuration set every
    send names (the construct's, the user's, or none)."""

    ses: SesEvidence | None
    outcome_events: OutcomeEvents | None
    configuration_set_name: str | None
    urgent_configuration_set_name: str | None = None  # the urgent lane's own, with its own delivery window

    def configuration_set_of(self, urgent: bool) -> str | None:
        """The configuration set a lane's consumer names on every send."""
        if urgent and self.urgent_configuration_set_name is not None:
            return self.urgent_configuration_set_name
        return self.configuration_set_name


@dataclass(frozen=True)
class LaneConsumer:
    function: lambda_.Function
    role: iam.IRole
    log_group: logs.ILogGroup
    event_source: event_sources.SqsEventSource


@dataclass(frozen=True)
class Monitoring:
    quota_watch: QuotaWatch | None
    alarms: dict[str, cloudwatch.Alarm]
    dashboard: cloudwatch.Dashboard | None
