"""A mis-keyed producer: an order service keys each receipt by the SQS message id of the order event it consumed
(``docs/choosing.md``'s first wrong key). Its own queue is at least once too and hands each event over twice (the
event re-enqueued after a timeout), so each order reaches it under two message ids: two keys for one receipt,
which the ledger alone would send twice. The example app deploys the mis-keyed-producer guard holding suspects
(``suspected_doubles=OnSuspectedDouble.HOLD``): each second copy goes to the DLQ unsent, with its reason.

Counted from the emulator's SES (each order's receipt once) and from the DLQ (each second copy there with reason
``suspected-double``), never from the consumer's output."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.mis_keyed import OnSuspectedDouble
from sendonce_contract.schema import DeadLetter, ReasonCode
from sendonce_producer import EmailJob, Pipeline

from ...lambda_service.stack_runners import StackRunners
from ..phase import PhaseContext, PhaseReport
from ..scenarios.flood import sends_by_key
from ..workload import SENDER, keys_by_emails

SUBJECT_PREFIX = "Mis-keyed producer: receipt for order "
ORDERS = 10
HANDED_OVER = 2  # times the order service's queue hands each event over
POLL_S = 0.25


def is_phase_email(sent: Any) -> bool:
    return str(getattr(sent, "subject", "")).startswith(SUBJECT_PREFIX)


@dataclass
class MisKeyedReport(PhaseReport):
    orders: int
    events: int  # order events the producer consumed: each order's HANDED_OVER times
    keys: int  # distinct dedupe keys it enqueued them under
    emails_per_order: dict[int, int]  # emails SES accepted per order -> orders
    held: int  # of the phase's keys, those in the DLQ with reason suspected-double
    held_reason: str  # the reason a held copy carries, as `sendonce dlq list` shows it
    drained: bool

    @property
    def ok(self) -> bool:
        return self.drained and self.emails_per_order == {1: self.orders} and self.held == self.keys - self.orders

    def failure(self) -> str:
        twice = sum(n for emails, n in self.emails_per_order.items() if emails > 1)
        found = [f"{twice} orders' receipts sent more than once" if twice else "",
                 f"{self.emails_per_order.get(0, 0)} orders' receipts not sent" if self.emails_per_order.get(0) else "",
                 "" if self.held == self.keys - self.orders else
                 f"{self.held} of {self.keys - self.orders} second copies held in the DLQ",
                 "" if self.drained else "not drained within its bound"]
        return "a mis-keyed producer: " + ", ".join(problem for problem in found if problem)

    def summary(self) -> str:
        return (f"a mis-keyed producer: {self.orders} receipts enqueued under {self.keys} keys, each sent once, "
                f"{self.held} second copies held in the DLQ")

    def lines(self) -> list[str]:
        return [
            f"  a mis-keyed producer: {self.events} order events consumed (its queue handed each of {self.orders} "
            f"orders over {HANDED_OVER} times), each receipt keyed by its event's SQS message id: {self.keys} keys",
            f"    emails per order: {self.emails_per_order}; held in the DLQ as {ReasonCode.SUSPECTED_DOUBLE.value}: "
            f"{self.held}, unsent, then deleted as an operator would (a redrive would send them); the reason they "
            f"carried: {self.held_reason}",
        ]


def _order_events(sqs: Any, seed: int) -> str:
    """The order service's own queue, each order's event on it HANDED_OVER times, as an at-least-once queue may."""
    queue_url = str(sqs.create_queue(QueueName=f"demo-order-events-{seed}")["QueueUrl"])
    for _ in range(HANDED_OVER):
        for n in range(ORDERS):
            sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps({"order": f"{seed}-{n}"}))
    return queue_url


def _produce(sqs: Any, events_url: str, pipeline: Pipeline, bound: float) -> tuple[int, set[str]]:
    """The mis-keyed producer: each event it consumes becomes a receipt keyed by the event's message id."""
    events, keys = 0, set[str]()
    while events < ORDERS * HANDED_OVER and time.monotonic() < bound:
        for message in sqs.receive_message(QueueUrl=events_url, MaxNumberOfMessages=10).get("Messages", []):
            order = json.loads(message["Body"])["order"]
            key = f"order-receipt:{message['MessageId']}"  # the mistake: a new id each time the event comes
            pipeline.enqueue(EmailJob(key, SENDER, [f"buyer-{order}@example.org"], subject=SUBJECT_PREFIX + order,
                                      text=f"Thank you for order {order}."))
            sqs.delete_message(QueueUrl=events_url, ReceiptHandle=message["ReceiptHandle"])
            events, keys = events + 1, keys | {key}
    return events, keys


def _held(sqs: Any, dlq_url: str, keys: set[str], found: dict[str, str]) -> None:
    """Add to ``found`` the phase's keys in the DLQ as suspected doubles, with their reasons, and delete them, as
    an operator does who sees they are doubles (a redrive would send them); any other message read is left
    invisible for a moment only (the report reads the DLQ at the end)."""
    seen: set[str] = set()
    while True:
        messages = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                       VisibilityTimeout=2).get("Messages", [])
        if not messages or all(m["MessageId"] in seen for m in messages):  # read through, or back to the start
            return
        seen.update(m["MessageId"] for m in messages)
        for message in messages:
            attributes = {n: a.get("StringValue", "") for n, a in message.get("MessageAttributes", {}).items()}
            key = attributes.get(DeadLetter.DEDUPE_KEY, "")
            if key in keys and attributes.get(DeadLetter.REASON_CODE) == ReasonCode.SUSPECTED_DOUBLE.value:
                found[key] = attributes.get(DeadLetter.REASON, "")
                sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=message["ReceiptHandle"])


def mis_keyed_phase(context: PhaseContext) -> MisKeyedReport | None:
    deployed, aws, say = context.deployed, context.aws, context.say
    config = ConsumerConfig.from_env(deployed.consumer.function.environment)
    if config.suspected_doubles is not OnSuspectedDouble.HOLD:
        say("      a mis-keyed producer: not in this run (the stack's pipeline does not hold suspected doubles: "
            "suspected_doubles=OnSuspectedDouble.HOLD)")
        return None
    say(f"      a mis-keyed producer: an order service keys each receipt by the SQS message id of the order event "
        f"it consumed, and its queue hands each of {ORDERS} orders' events over {HANDED_OVER} times; the deployed "
        "guard holds the same receipt to the same buyer under a second key in the DLQ")
    sqs, bound = boto3.client("sqs"), time.monotonic() + context.options.bound()
    since = len(aws.ses_sends(0))
    runners = StackRunners(aws.environment, context.log).start([deployed.consumer], [])
    found: dict[str, str] = {}
    drained, events, keys = False, 0, set[str]()
    try:
        pipeline = Pipeline(queue_url=deployed.consumer.source.queue_url, table_name="-")
        events, keys = _produce(sqs, _order_events(sqs, context.options.seed), pipeline, bound)
        runner = runners.runner_of(deployed.consumer)
        # Every order's receipt sent and the queue empty: a held copy is in the DLQ before its message is deleted.
        while not drained and time.monotonic() < bound:
            time.sleep(POLL_S)
            drained = (len(sends_by_key(aws.ses_sends, since, SUBJECT_PREFIX)) == ORDERS
                       and not any(runner.queue_depth().values()))
    finally:
        runners.stop()
    _held(sqs, config.dead_letter_queue_url, keys, found)
    sent = sends_by_key(aws.ses_sends, since, SUBJECT_PREFIX)
    per_order = Counter({f"{context.options.seed}-{n}": len(sent.get(f"{context.options.seed}-{n}", []))
                         for n in range(ORDERS)})
    report = MisKeyedReport(orders=ORDERS, events=events, keys=len(keys), emails_per_order=keys_by_emails(per_order),
                            held=len(found), held_reason=next(iter(found.values()), "none held"), drained=drained)
    for line in report.lines():
        say(f"    {line.strip()}")
    return report
