"""Kills a worker at a chosen point of the protocol, the way a Lambda timeout, OOM or deploy would."""

from __future__ import annotations

import enum
from typing import Any


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
