"""DynamoDB and SQS behind a proxy that answers late, or refuses, for a stretch: the faults a slow network or a
throttled table bring, which the emulator cannot be asked for.

A late answer is carried out first and answered after ``late_s``: a client whose read timeout is shorter gives
up although the write happened, which is the case that matters (a lost answer is not a failure).
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3
from consumer_harness import failed_ids

from sendonce_constructs.local.event_source_runner import EventSourceSpec, lambda_record
from sendonce_constructs.local.proxy import Forward, ForwardingProxy, ProxiedRequest, Reply
from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outcome_log import OutcomeLog

LATE = "late"


@dataclass(frozen=True)
class Rule:
    service: str  # "dynamodb", "sqs"
    operation: str | None  # "PutItem", "SendMessage", ... or None for every operation of the service
    fault: str  # LATE, or an error code answered with ``status``
    status: int = 400


def operation_of(request: ProxiedRequest) -> str:
    target = request.headers.get("X-Amz-Target", request.headers.get("x-amz-target", ""))
    return target.rpartition(".")[2]


class SlowAws:
    def __init__(self, upstream: str, late_s: float = 0.5) -> None:
        self.late_s = late_s
        self._rules: list[Rule] = []
        self._until = 0.0
        self._lock = threading.Lock()
        self.hits: Counter[tuple[str, str, str]] = Counter()
        self._proxy = ForwardingProxy(upstream, self._behave)
        self.endpoint = self._proxy.endpoint

    def start(self) -> SlowAws:
        self._proxy.start()
        return self

    def stop(self) -> None:
        self._proxy.stop()

    def fault(self, *rules: Rule, for_s: float = 3600.0) -> None:
        """From now on and for ``for_s`` seconds, requests matching a rule get its fault."""
        with self._lock:
            self._rules, self._until = list(rules), time.monotonic() + for_s

    def clear(self) -> None:
        self.fault(for_s=0)

    def _match(self, request: ProxiedRequest) -> Rule | None:
        with self._lock:
            if time.monotonic() >= self._until:
                return None
            operation = operation_of(request)
            for rule in self._rules:
                if rule.service == request.service and rule.operation in (None, operation):
                    self.hits[rule.service, operation, rule.fault] += 1
                    return rule
        return None

    def _behave(self, request: ProxiedRequest, forward: Forward) -> Reply | None:
        rule = self._match(request)
        if rule is None:
            return forward()
        if rule.fault == LATE:
            reply = forward()
            time.sleep(self.late_s)  # the client gave up already; the write happened
            return reply
        body = json.dumps({"__type": rule.fault, "message": f"played {rule.fault}"}).encode()
        headers = [("x-amzn-ErrorType", rule.fault), ("Content-Type", "application/x-amz-json-1.0")]
        return Reply(rule.status, headers, body)


# A 3 s function's ledger and SQS calls: 180 ms to connect, 120 ms to read (the construct's sizing).
LEDGER_BUDGET_MS = 900
LATE_S = 0.3
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

    def receive(self, wait_s: float = 10) -> list[dict[str, Any]]:
        """The next visible messages as Lambda records, polled with a bound (delayed copies take seconds)."""
        bound = time.monotonic() + wait_s
        while time.monotonic() < bound:
            messages = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                                VisibilityTimeout=18, MessageSystemAttributeNames=["All"],
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
    pipeline: Any, slow: SlowAws, jobs: Jobs, clock: Any = None, **overrides: Any
) -> tuple[Consumer, io.StringIO]:
    """The real consumer, its DynamoDB and SQS behind the slow proxy, sized as for a 3 s function."""
    settings = pipeline.settings(queue_url=jobs.url, max_receive_count=MAX_RECEIVES,
                                 ledger_budget_ms=LEDGER_BUDGET_MS, ses_read_timeout_s=0.75,
                                 ses_connect_timeout_s=0.3, **overrides)
    log = io.StringIO()
    built = Consumer.from_clients(
        settings,
        boto3.client("dynamodb", config=ledger_config(settings), endpoint_url=slow.endpoint),
        boto3.client("sesv2", config=ses_config(settings), endpoint_url=pipeline.ses_endpoint),
        boto3.client("sqs", config=ledger_config(settings), endpoint_url=slow.endpoint),
        clock, OutcomeLog(log, pipeline="Shop/Receipts"),
    )
    return built, log
