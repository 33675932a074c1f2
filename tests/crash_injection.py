"""Kills a worker at a chosen point of the protocol, the way a Lambda timeout, OOM or deploy would."""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from sendonce_testing.lambda_events import FakeContext, event, job, sqs_record


class WorkerKilled(BaseException):
    """Not an Exception: like a killed process, nothing in the consumer may catch it."""


class CrashPoint(enum.Enum):
    BEFORE_CLAIM = "before_claim"
    AFTER_CLAIM = "after_claim"
    AFTER_SES_ACCEPTED = "after_ses_accepted"
    AFTER_SENT = "after_sent"


def crash_at(consumer: Any, point: CrashPoint) -> Any:
    """Make ``consumer`` die at ``point`` on its next record; returns it for chaining."""
    processor = consumer.processor
    ledger, sender = processor._ledger, processor._sender
    claim, send, mark_sent = ledger.claim, sender.send, ledger.mark_sent

    def claim_then_maybe_die(*args: Any, **kwargs: Any) -> Any:
        if point is CrashPoint.BEFORE_CLAIM:
            raise WorkerKilled(point.value)
        result = claim(*args, **kwargs)
        if point is CrashPoint.AFTER_CLAIM and result.won:
            raise WorkerKilled(point.value)
        return result

    def send_then_die(*args: Any, **kwargs: Any) -> Any:
        outcome = send(*args, **kwargs)
        raise WorkerKilled(f"{point.value}: {outcome}")

    def mark_sent_then_die(*args: Any, **kwargs: Any) -> Any:
        mark_sent(*args, **kwargs)
        raise WorkerKilled(point.value)

    ledger.claim = claim_then_maybe_die
    if point is CrashPoint.AFTER_SES_ACCEPTED:
        sender.send = send_then_die
    if point is CrashPoint.AFTER_SENT:
        ledger.mark_sent = mark_sent_then_die
    return consumer


def deliver(pipeline: Any, clock: Any, key: str, crash: CrashPoint | None = None, **consumer_options: Any) -> bool:
    """Deliver ``key``'s job to a fresh consumer, killed at ``crash`` if one is given; True when it was killed."""
    consumer = pipeline.consumer(clock, **consumer_options)
    if crash is not None:
        crash_at(consumer, crash)
    try:
        consumer.handle(event(sqs_record(job(key))), FakeContext(clock))
    except WorkerKilled:
        return True
    return False


# A step of an interleaving: which key is delivered, where its worker dies (None: nowhere), then how far time moves.
Step = tuple[int, CrashPoint | None, int]


def play_steps(
    pipeline: Any, clock: Any, prefix: str, steps: Iterable[Step], keys: int,
    after_each: Callable[[], None] = lambda: None, **consumer_options: Any,
) -> dict[int, Counter[CrashPoint]]:
    """Deliver each step's key (``prefix:index``), killed at the step's crash point if any, call ``after_each``, then
    advance the clock; return how often each key's worker was killed at each point."""
    crashes: dict[int, Counter[CrashPoint]] = {k: Counter() for k in range(keys)}
    for key_index, crash, advance_ms in steps:
        if deliver(pipeline, clock, f"{prefix}:{key_index}", crash, **consumer_options) and crash is not None:
            crashes[key_index][crash] += 1
        after_each()
        clock.advance(advance_ms)
    return crashes
