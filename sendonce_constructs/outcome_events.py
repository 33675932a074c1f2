"""Outcome events: each transition of a key's ledger record, published to EventBridge for the application.

The dedupe table's stream (new and old images) feeds a small bundled publisher; ``on_outcome`` makes a rule that
matches this pipeline's events of the kinds asked for. See :mod:`sendonce_contract.outcome_events` for the events.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.companion_configs import PublisherConfig
from sendonce_contract.job_lifetime import DEAD_LETTER_RETENTION_S
from sendonce_contract.outcome_events import BY_TRANSITION, OUTCOME_TYPES, SOURCE

from .acknowledgements import acknowledge
from .bundled_function import BundledFunction, FunctionOptions
from .errors import ID_PREFIX, SendOnceConfigurationError
from .runtime_asset import OUTCOME_HANDLER

# Every outcome event's "transition", for on_outcome(outcomes=[...]).
OUTCOMES = tuple(outcome.transition for outcome in OUTCOME_TYPES)


class OutcomeEvents(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        bus: events.IEventBus | None,
        pipeline_tag: str,
        pipeline_name: str,
        function_options: FunctionOptions,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, id)
        self.bus = bus or events.EventBus.from_event_bus_name(self, "DefaultBus", "default")
        self.pipeline_tag = pipeline_tag
        # Where a batch of stream records goes once the publisher gave up on it: its stream position, to replay.
        self.failures = sqs.Queue(
            self, "Failures", retention_period=Duration.seconds(DEAD_LETTER_RETENTION_S),
            encryption=sqs.QueueEncryption.KMS if encryption_key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=encryption_key, enforce_ssl=True,
        )
        acknowledge(self.failures, "AwsSolutions-SQS3",
                    "This queue is the outcome publisher's on-failure destination: the end of the line, like a DLQ.")
        acknowledge(self.failures, "Serverless-SQSRedrivePolicy",
                    "This queue is the outcome publisher's on-failure destination: a queue behind it would hide "
                    "failures.")
        publisher = BundledFunction(
            self, "Publisher", handler=OUTCOME_HANDLER, timeout=Duration.seconds(30), options=function_options,
            environment=PublisherConfig(self.bus.event_bus_name, pipeline_tag, pipeline_name).to_env(),
            invoked_by="its stream event source",
            description="sendonce outcome publisher: each transition of a key, as an event on EventBridge",
            role_description="sendonce outcome publisher: the dedupe table's stream, its event bus, its log group",
        )
        self.publisher, self.role, self.log_group = publisher.function, publisher.role, publisher.log_group
        self.publisher.add_event_source(event_sources.DynamoEventSource(
            table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=100,
            bisect_batch_on_error=True,
            retry_attempts=10,
            report_batch_item_failures=True,
            # A removal (TTL, a released claim) is no outcome: it never wakes the publisher.
            filters=[lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.or_("INSERT", "MODIFY")})],
            on_failure=event_sources.SqsDlq(self.failures),
        ))
        self.bus.grant_put_events_to(self.publisher)
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                    "The stream event source's dynamodb:ListStreams has no resource-level permission; reading the "
                    "stream itself is granted on the dedupe table's stream ARN only (and X-Ray's, when tracing is "
                    "on, have none at all).")

    def rule(self, scope: Construct, id: str, targets: Sequence[events.IRuleTarget],
             outcomes: Sequence[str] | None) -> events.Rule:
        unknown = sorted(set(outcomes or ()) - set(BY_TRANSITION))
        if unknown:
            raise SendOnceConfigurationError(f"on_outcome outcomes {unknown} are not outcomes; choose from "
                                             f"{list(OUTCOMES)}", f"{ID_PREFIX}UnknownOutcome", scope.node.path)
        chosen = [BY_TRANSITION[name] for name in outcomes] if outcomes else list(OUTCOME_TYPES)
        return events.Rule(
            scope, id, event_bus=self.bus, targets=list(targets),
            description=f"sendonce outcome events ({', '.join(o.transition for o in chosen)}) of one pipeline",
            event_pattern=events.EventPattern(source=[SOURCE], detail_type=[o.detail_type for o in chosen],
                                              detail={"pipeline": [self.pipeline_tag]}),
        )

    def failures_alarm(self, topic: sns.ITopic | None) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self, "FailuresAlarm",
            metric=self.failures.metric_approximate_number_of_messages_visible(period=Duration.minutes(1),
                                                                               statistic="Maximum"),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description="Outcome events the publisher could not put on EventBridge after its retries: each "
                              "message holds a stream position; the application missed those transitions.",
        )
        if topic is not None:
            alarm.add_alarm_action(actions.SnsAction(topic))
        return alarm
