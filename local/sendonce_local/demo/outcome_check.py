"""What the application heard: the outcome events a subscribed app's queue received, checked against the ledger.

The example app routes this pipeline's ``bounced`` and ``complained`` outcome events to a queue of its own
(``on_outcome``). The demo drains that queue, counts the keys it heard about per transition, and compares them with
the keys whose ledger records hold that outcome: every bounce and complaint SES reported must reach the app, and
nothing else.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import boto3

from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import DEDUPE_KEY, Ledger

from .phase import PhaseReport

# What the example app subscribes to (examples/app.py): its queue is found by demo.example_app.
SUBSCRIBED = ("bounced", "complained")


@dataclass
class OutcomeEventsCheck(PhaseReport):
    heard: dict[str, int] = field(default_factory=dict)  # transition -> distinct keys the app heard of
    ledger: dict[str, int] = field(default_factory=dict)  # transition -> distinct keys whose record says so
    events: int = 0  # events received, duplicates included (delivery is at least once)

    @property
    def ok(self) -> bool:
        return all(self.heard.get(name, 0) == self.ledger.get(name, 0) for name in SUBSCRIBED)

    def line(self) -> str:
        parts = [f"{name} {self.heard.get(name, 0)} (ledger {self.ledger.get(name, 0)})" for name in SUBSCRIBED]
        return (f"outcome events the app heard, every phase's keys ({self.events} events): " + ", ".join(parts)
                + ("" if self.ok else " MISMATCH"))

    def lines(self) -> list[str]:
        return [f"  {self.line()}"]

    def failure(self) -> str:
        return self.line()


def check_outcome_events(queue_url: str, table_name: str) -> OutcomeEventsCheck:
    sqs = boto3.client("sqs")
    keys: dict[str, set[str]] = {name: set() for name in SUBSCRIBED}
    received = 0
    while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                       WaitTimeSeconds=0).get("Messages", []):
        for message in batch:
            detail: dict[str, Any] = json.loads(message["Body"]).get("detail", {})
            received += 1
            if detail.get("transition") in keys:
                keys[detail["transition"]].add(str(detail.get(DEDUPE_KEY)))
    return OutcomeEventsCheck({name: len(found) for name, found in keys.items()}, _ledger_outcomes(table_name),
                              received)


def _ledger_outcomes(table_name: str) -> dict[str, int]:
    counts: Counter[str] = Counter()
    request: dict[str, Any] = {"TableName": table_name}
    client = boto3.client("dynamodb")
    while True:
        page = client.scan(**request)
        for item in page.get("Items", []):
            if Ledger.STATUS not in item:
                continue
            record = EmailRecord.from_item(item)
            counts.update(name for name in SUBSCRIBED if record.outcome(name) is not None)
        if "LastEvaluatedKey" not in page:
            return dict(counts)
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
