"""Jobs, the SQS records and events Lambda hands the consumer, and Lambda contexts, as the tests and the benchmark
build them."""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

SENDER_DOMAIN = "example.com"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:jobs"
_ids = itertools.count(1)


class FakeClock:
    """Wall-clock milliseconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = time.time_ns() // 1_000_000

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class FakeContext:
    """A Lambda context whose deadline is ``budget_ms`` after it was made, on the test's clock."""

    clock: FakeClock
    budget_ms: int = 30_000
    deadline_ms: int = field(init=False)

    def __post_init__(self) -> None:
        self.deadline_ms = self.clock.now_ms() + self.budget_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.deadline_ms - self.clock.now_ms())


@dataclass(frozen=True)
class LambdaContext:
    """A Lambda context with a fixed time left, carrying the attributes Lambda's context has (Powertools reads
    them)."""

    remaining_ms: int = 30_000
    function_name: str = "bench"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    aws_request_id: str = "bench"

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def job(key: str, **overrides: Any) -> dict[str, Any]:
    """A valid job whose subject names its key, so the emulator's sent mail can be counted per key."""
    body: dict[str, Any] = {
        "dedupeKey": key,
        "from": f"Shop <receipts@{SENDER_DOMAIN}>",
        "to": ["ada@example.org"],
        "subject": f"Receipt {key}",
        "text": "Thanks for your order.",
    }
    body.update(overrides)
    return body


def sqs_record(body: dict[str, Any] | str, receive_count: int = 1, group: str | None = None) -> dict[str, Any]:
    """An SQS record with the fields the consumer reads."""
    attributes = {"ApproximateReceiveCount": str(receive_count)}
    if group is not None:
        attributes["MessageGroupId"] = group
    return {
        "messageId": f"msg-{next(_ids):06d}",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": attributes,
        "eventSourceARN": QUEUE_ARN,
    }


def lambda_sqs_record(body: dict[str, Any] | str) -> dict[str, Any]:
    """An SQS record with every field Lambda's SQS event source gives (a batch utility may read any of them)."""
    return {**sqs_record(body), "receiptHandle": "r", "messageAttributes": {}, "md5OfBody": "",
            "eventSource": "aws:sqs", "awsRegion": "us-east-1"}


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def failed_ids(response: dict[str, Any]) -> set[str]:
    return {item["itemIdentifier"] for item in response["batchItemFailures"]}
