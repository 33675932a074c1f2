"""SES's own events as the evidence of each send: a configuration set publishing to the default event bus, a rule
matching this pipeline's emails only, a queue with its DLQ, and the bundled recorder writing onto the ledger."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.companion_configs import RecorderConfig
from sendonce_contract.job_lifetime import DEAD_LETTER_RETENTION_S
from sendonce_contract.key_tags import PIPELINE_TAG
from sendonce_contract.schema import SES_EVENT_TYPES

from .acknowledgements import acknowledge
from .bundled_function import BundledFunction, FunctionOptions
from .runtime_asset import RECORDER_HANDLER

# What SES publishes: every event that proves it accepted an email, or says what became of it.
EVIDENCE_EVENTS = [ses.EmailSendingEvent.SEND, ses.EmailSendingEvent.DELIVERY, ses.EmailSendingEvent.BOUNCE,
                   ses.EmailSendingEvent.COMPLAINT, ses.EmailSendingEvent.REJECT,
                   ses.EmailSendingEvent.DELIVERY_DELAY, ses.EmailSendingEvent.RENDERING_FAILURE]
DETAIL_TYPES = [event.detail_type for event in SES_EVENT_TYPES]
RECORDER_TIMEOUT = Duration.seconds(30)


class SesEvidence(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        table: dynamodb.ITable,
        configuration_set: str | ses.IConfigurationSet | None,
        suppression_reasons: ses.SuppressionReasons | None,
        disable_suppression_list: bool,
        pipeline_tag: str,
        pipeline_name: str,
        function_options: FunctionOptions,
        queue_encryption: sqs.QueueEncryption,
        encryption_key: kms.IKey | None,
        max_delivery_duration: Duration | None = None,
        urgent_max_delivery_duration: Duration | None = None,
        urgent_lane: bool = False,
    ) -> None:
        super().__init__(scope, id)
        if configuration_set is None:
            self.configuration_set: ses.IConfigurationSet = ses.ConfigurationSet(
                self, "ConfigurationSet", suppression_reasons=suppression_reasons,
                disable_suppression_list=disable_suppression_list or None,
                max_delivery_duration=max_delivery_duration)
        elif isinstance(configuration_set, str):
            self.configuration_set = ses.ConfigurationSet.from_configuration_set_name(
                self, "UserConfigurationSet", configuration_set)
        else:
            self.configuration_set = configuration_set
        default_bus = events.EventBus.from_event_bus_name(self, "DefaultBus", "default")
        self.event_destination = ses.ConfigurationSetEventDestination(
            self, "EventDestination", configuration_set=self.configuration_set,
            destination=ses.EventDestination.event_bus(default_bus), events=EVIDENCE_EVENTS,
        )
        # The urgent lane's own set beside the one the construct makes, so its delivery window (and SES's per-set
        # metrics) stand apart from bulk's; with the user's own set, both lanes send through that. Its events reach
        # the same rule (it matches the pipeline's tag, not the set), so the evidence is the same.
        self.urgent_configuration_set: ses.IConfigurationSet | None = None
        if urgent_lane and configuration_set is None:
            self.urgent_configuration_set = ses.ConfigurationSet(
                self, "UrgentConfigurationSet", suppression_reasons=suppression_reasons,
                disable_suppression_list=disable_suppression_list or None,
                max_delivery_duration=urgent_max_delivery_duration or max_delivery_duration)
            ses.ConfigurationSetEventDestination(
                self, "UrgentEventDestination", configuration_set=self.urgent_configuration_set,
                destination=ses.EventDestination.event_bus(default_bus), events=EVIDENCE_EVENTS)
        self._build_queues(queue_encryption, encryption_key)
        self.rule = events.Rule(
            self, "Rule",
            description="sendonce: SES's events for this pipeline's emails, to its recorder",
            event_pattern=events.EventPattern(source=["aws.ses"], detail_type=DETAIL_TYPES,
                                              detail={"mail": {"tags": {PIPELINE_TAG: [pipeline_tag]}}}),
            targets=[targets.SqsQueue(self.queue, dead_letter_queue=self.dead_letter_queue)],
        )
        self._build_recorder(table, pipeline_tag, pipeline_name, function_options)

    def _build_queues(self, encryption: sqs.QueueEncryption, key: kms.IKey | None) -> None:
        self.dead_letter_queue = sqs.Queue(
            self, "DeadLetterQueue", retention_period=Duration.seconds(DEAD_LETTER_RETENTION_S),
            encryption=encryption, encryption_master_key=key, enforce_ssl=True)
        acknowledge(self.dead_letter_queue, "Serverless-SQSRedrivePolicy",
                    "This is the evidence queue's dead-letter queue: a queue behind it would hide failed events.")
        self.queue = sqs.Queue(
            self, "Queue", visibility_timeout=Duration.seconds(6 * RECORDER_TIMEOUT.to_seconds()),
            retention_period=Duration.days(4), encryption=encryption, encryption_master_key=key, enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dead_letter_queue, max_receive_count=5),
        )

    def _build_recorder(self, table: dynamodb.ITable, pipeline_tag: str, pipeline_name: str,
                        function_options: FunctionOptions) -> None:
        recorder = BundledFunction(
            self, "Recorder", handler=RECORDER_HANDLER, timeout=RECORDER_TIMEOUT, options=function_options,
            environment=RecorderConfig(table.table_name, self.dead_letter_queue.queue_url, pipeline_tag,
                                       pipeline_name).to_env(),
            invoked_by="its SQS event source",
            description="sendonce SES event recorder: writes SES's word on each send onto its dedupe record",
            role_description="sendonce SES event recorder: its queue, the dedupe table, its DLQ, its logs",
        )
        self.recorder, self.role, self.log_group = recorder.function, recorder.role, recorder.log_group
        self.event_source = event_sources.SqsEventSource(self.queue, batch_size=10, report_batch_item_failures=True)
        self.recorder.add_event_source(self.event_source)
        acknowledge(self, "Serverless-LambdaEventSourceMappingDestination",
                    "SQS event sources take no on-failure destination; failed events go to the queue's redrive DLQ.")
        table.grant(self.recorder, "dynamodb:UpdateItem")
        self.dead_letter_queue.grant_send_messages(self.recorder)
