"""Drives the real consumer against the emulator: a clock the test moves, Lambda contexts, SQS events, emails."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import boto3
from botocore.config import Config

from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.settings import Settings
from sendonce_testing.lambda_events import (
    SENDER_DOMAIN,
    FakeClock,
    FakeContext,
    event,
    failed_ids,
    job,
    sqs_record,
)

__all__ = ["SENDER_DOMAIN", "FakeClock", "FakeContext", "Pipeline", "create_pipeline", "event", "failed_ids", "job",
           "run_at_once", "sqs_record"]

CONFIGURATION_SET = "sendonce-test-evidence"
# The deployed consumer reads a DynamoDB or SQS answer for 0.8 s at most (its time budget): on a loaded host the
# emulator takes longer now and then, and a test of something else would meet the consumer's late-answer path.
EMULATOR_READ_TIMEOUT_S = 10.0
PIPELINE_TAG = "test-pipeline"


@dataclass
class Pipeline:
    """The AWS side of one test: a dedupe table, a DLQ, a verified sender, and what SES accepted."""

    aws: Any
    table_name: str
    dead_letter_queue_url: str
    ses_endpoint: str | None = None
    parallelism: int = 1  # what consumers get unless a test names its own
    evidence_dead_letter_queue_url: str | None = None
    recorder: Any = None
    recorder_log: Any = None
    patches: Any = None  # a pytest MonkeyPatch, undone after the test: where the played SES takes its clock
    ses_clock: Any = None  # the clock the played SES stamps what it accepts with (None: the wall clock)

    def settings(self, **overrides: Any) -> Settings:
        overrides.setdefault("parallelism", self.parallelism)
        base = Settings(table_name=self.table_name, dead_letter_queue_url=self.dead_letter_queue_url)
        return base._replace(**overrides)

    def consumer(self, clock: Any = None, ses_endpoint: str | None = None, **overrides: Any) -> Consumer:
        """The consumer as deployed, on the emulator; its calls besides SES's wait up to
        :data:`EMULATOR_READ_TIMEOUT_S` for an answer (tests of late answers set their own clients)."""
        settings = self.settings(**overrides)
        endpoint = ses_endpoint or self.ses_endpoint
        ledger = ledger_config(settings).merge(Config(read_timeout=EMULATOR_READ_TIMEOUT_S))
        return Consumer.from_clients(
            settings,
            boto3.client("dynamodb", config=ledger),
            boto3.client("sesv2", config=ses_config(settings), endpoint_url=endpoint),
            boto3.client("sqs", config=ledger),
            clock,
            OutcomeLog(io.StringIO()),
            events=boto3.client("events") if settings.outcome_bus else None,
            secrets=boto3.client("secretsmanager", config=ledger) if settings.key_secret_id else None,
            s3=boto3.client("s3", config=ledger) if settings.attachments_bucket else None,
        )

    def evidence_settings(self, grace_ms: int = 60_000, ses_events: bool = True, **overrides: Any) -> dict[str, Any]:
        """Settings of a consumer whose sends SES's events confirm (see :meth:`ses_events`), unless ``ses_events``
        is False (a grace period is what turns them on)."""
        return {"evidence_grace_ms": grace_ms if ses_events else None, "pipeline_tag": PIPELINE_TAG,
                "configuration_set": CONFIGURATION_SET, **overrides}

    def ses_events(self, clock: Any = None, faults: Any = None, seed: int = 0) -> Any:
        """SES's event publishing played for this pipeline, delivered straight to a recorder (no EventBridge):
        ``publisher.pump(float("inf"))`` hands every event so far to the recorder. With a ``clock``, the recorder
        and the played SES (its ``mail.timestamp``) keep the test's time, as the consumer does."""
        from sendonce_local.emulator.ses_publisher import EventFaults, SesEventPublisher, as_sqs_records
        from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings

        if clock is not None:
            self._stamp_ses_sends_with(clock)
        if self.evidence_dead_letter_queue_url is None:
            self.evidence_dead_letter_queue_url = boto3.client("sqs").create_queue(
                QueueName="evidence-dlq")["QueueUrl"]
        settings = RecorderSettings(self.table_name, self.evidence_dead_letter_queue_url, PIPELINE_TAG)
        self.recorder_log = io.StringIO()
        self.recorder = EventRecorder.from_clients(settings, boto3.client("dynamodb"), boto3.client("sqs"), clock,
                                                   EventLog(self.recorder_log))
        recorder = self.recorder

        def deliver(events: list[dict[str, Any]]) -> None:
            response = recorder.handle({"Records": as_sqs_records(events)})
            assert response == {"batchItemFailures": []}, response

        return SesEventPublisher([CONFIGURATION_SET], deliver, self.aws.account_id, self.aws.region,
                                 faults or EventFaults(delay_s=0, outcome_delay_s=0), seed)

    def _stamp_ses_sends_with(self, clock: Any) -> None:
        """SES and the consumer share the wall clock, and the recorder compares their times (an email accepted
        before its key's record was claimed belongs to an earlier lifetime of the key): a test that moves its
        clock moves SES's too, until the test ends."""
        from sendonce_local.emulator import ses_publisher

        assert self.patches is not None, "the played SES keeps a test's clock only for a pipeline fixture"
        if self.ses_clock is None:
            accepted = ses_publisher.accepted_send

            def stamped(params: dict[str, Any], message_id: str) -> Any:
                send = accepted(params, message_id)
                return replace(send, accepted_at=self.ses_clock.now_ms() / 1000)

            self.patches.setattr(ses_publisher, "accepted_send", stamped)
        self.ses_clock = clock

    def recorder_outcomes(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.recorder_log.getvalue().splitlines()]

    def emails_per_key(self) -> Counter[str]:
        return Counter(
            message.subject.removeprefix("Receipt ")
            for message in self.aws.sent_emails()
            if getattr(message, "subject", "").startswith("Receipt ")
        )

    def emails_for(self, key: str) -> int:
        return self.emails_per_key()[key]

    def ledger_item(self, key: str) -> dict[str, Any] | None:
        item = boto3.client("dynamodb").get_item(TableName=self.table_name, Key={"dedupeKey": {"S": key}})
        return item.get("Item")

    def status(self, key: str) -> str | None:
        item = self.ledger_item(key)
        return item["status"]["S"] if item else None

    def dead_letters(self) -> list[dict[str, Any]]:
        sqs = boto3.client("sqs")
        messages: list[dict[str, Any]] = []
        while True:
            batch = sqs.receive_message(
                QueueUrl=self.dead_letter_queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
                VisibilityTimeout=600,
            ).get("Messages", [])
            if not batch:
                return messages
            messages += batch


def create_pipeline(aws: Any, fifo: bool = False, patches: Any = None) -> Pipeline:
    suffix = ".fifo" if fifo else ""
    boto3.client("dynamodb").create_table(
        TableName="dedupe",
        KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    attributes = {"FifoQueue": "true"} if fifo else {}
    url = boto3.client("sqs").create_queue(QueueName=f"jobs-dlq{suffix}", Attributes=attributes)["QueueUrl"]
    boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER_DOMAIN)
    return Pipeline(aws=aws, table_name="dedupe", dead_letter_queue_url=url, patches=patches)


def run_at_once(steps: list[Any], bound_s: float = 60) -> None:
    """Start every step in its own thread at the same moment (a barrier), and wait for all of them."""
    start = threading.Barrier(len(steps))
    threads = [threading.Thread(target=lambda step=step: (start.wait(), step())) for step in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(bound_s)
