"""The real consumer with its DynamoDB and SQS behind the slow-services proxy, and the job queue as Lambda's
event source sees it (messages received with their receipt handles)."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import boto3
from botocore.config import Config
from consumer_harness import failed_ids

from sendonce_contract.deploy_config import TimeBudget
from sendonce_local.emulator.slow_services import SlowServices
from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record
from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outcome_log import OutcomeLog

# A 3 s function's ledger and SQS calls (the construct's sizing): the consumer's deadline guard, on a fake clock,
# plans with it.
LEDGER_BUDGET_MS = 900
# The clients' real read timeout: longer than any answer of a loaded host (the sized 120 ms, then 1.5 s, were
# passed now and then in a stress run, which made a prompt answer look lost). The answers a test means to lose are
# lost by the proxy closing the connection once the call is carried out, whatever this timeout.
HARNESS_READ_TIMEOUT_S = 30.0
# The sized 0.75 s for SES's answer, which a loaded emulator passed now and then, made a send look ambiguous.
SES_READ_TIMEOUT_S = 10.0
MAX_RECEIVES = 5


class Jobs:
    """The job queue, as Lambda's event source sees it: messages received with their handles."""

    def __init__(self, name: str = "jobs") -> None:
        self.sqs = boto3.client("sqs")
        self.url = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.source = EventSourceSpec(self.url, arn)

    def enqueue(self, body: dict[str, Any]) -> None:
        self.sqs.send_message(QueueUrl=self.url, MessageBody=json.dumps(body))

    def receive(self, wait_s: float = 10, batch_size: int = 10, visibility_s: int = 18) -> list[dict[str, Any]]:
        """The next visible messages as Lambda records, polled with a bound (delayed copies take seconds), out of
        sight for ``visibility_s`` (the queue's visibility timeout, as Lambda's event source receives them)."""
        bound = time.monotonic() + wait_s
        while time.monotonic() < bound:
            messages = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=batch_size, WaitTimeSeconds=1,
                                                VisibilityTimeout=visibility_s, MessageSystemAttributeNames=["All"],
                                                MessageAttributeNames=["All"]).get("Messages", [])
            if messages:
                return [lambda_record(m, self.source, "us-east-1") for m in messages]
        return []

    def acknowledge(self, response: dict[str, Any], *records: dict[str, Any]) -> None:
        """What Lambda does with the batch response: delete all but the failures."""
        failed = failed_ids(response)
        for record in records:
            if record["messageId"] not in failed:
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=record["receiptHandle"])

    def depth(self) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        return sum(int(v) for v in attributes.values())


def consumer(
    pipeline: Any, slow: SlowServices, jobs: Jobs, clock: Any = None, **overrides: Any
) -> tuple[Consumer, io.StringIO]:
    """The real consumer, its DynamoDB and SQS behind the slow proxy, sized as for a 3 s function."""
    settings = pipeline.settings(queue_url=jobs.url, max_receive_count=MAX_RECEIVES,
                                 time_budget=TimeBudget(ledger_budget_ms=LEDGER_BUDGET_MS, ses_read_timeout_s=0.75,
                                                        ses_connect_timeout_s=0.3), **overrides)
    log = io.StringIO()
    ledger = ledger_config(settings).merge(Config(read_timeout=HARNESS_READ_TIMEOUT_S))
    built = Consumer.from_clients(
        settings,
        boto3.client("dynamodb", config=ledger, endpoint_url=slow.endpoint),
        # SES is not what these tests slow down: its answer is waited for as the harness's own calls' are.
        boto3.client("sesv2", config=ses_config(settings).merge(Config(read_timeout=SES_READ_TIMEOUT_S)),
                     endpoint_url=pipeline.ses_endpoint),
        boto3.client("sqs", config=ledger, endpoint_url=slow.endpoint),
        clock, OutcomeLog(log, pipeline="Shop/Receipts"),
        s3=boto3.client("s3", config=ledger, endpoint_url=slow.endpoint)
        if settings.attachments_bucket else None,
    )
    return built, log
