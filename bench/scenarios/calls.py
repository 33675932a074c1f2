"""1. AWS calls per record: each consumer's calls for a first send, a duplicate, an in-flight retry and a poison
message, counted on its own clients."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any

import boto3
from consumers import factory

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record


def count_calls(kind: str, names: dict[str, str]) -> dict[str, dict[str, int]]:
    handler, clients = factory(kind, names)()
    calls: Counter[str] = Counter()
    for client in clients.values():
        client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
    prefix = uuid.uuid4().hex[:8]

    def deliver(body: dict[str, Any] | str) -> dict[str, int]:
        calls.clear()
        handler({"Records": [record(body)]}, Context())
        return dict(calls)

    scenarios = {"first send": deliver(job(f"{prefix}:first")), "duplicate": deliver(job(f"{prefix}:first"))}
    if kind == "sendonce":
        from sendonce_runtime.ledger import DedupeLedger

        ledger = DedupeLedger(boto3.client("dynamodb"), names["ours"], 3600, _SystemClock())
        ledger.claim(f"{prefix}:busy", "other-worker", time.time_ns() // 1_000_000 + 600_000, "h")
        scenarios["in-flight retry"] = deliver(job(f"{prefix}:busy"))
        scenarios["poison message"] = deliver("{not json")
    return scenarios


class _SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
