"""What became of one record: the outcome names, whether SQS should redeliver it, and its log line."""

from __future__ import annotations

import enum
import json
import sys
import threading
import time
from typing import NamedTuple, TextIO


class Outcome(enum.Enum):
    # Acknowledged: SQS deletes the message.
    SENT = "sent"
    SENT_UNRECORDED = "sent_unrecorded"  # SES accepted, but the ledger write failed: acked, never resent
    DUPLICATE = "duplicate"
    MARKED_UNKNOWN = "marked_unknown"
    INVALID_MESSAGE = "invalid_message"
    REFUSED = "refused"
    RECEIVES_EXHAUSTED = "receives_exhausted"  # dead-lettered with its last reason, before SQS moved it with none
    # Reported as batch item failures: SQS delivers them again after the visibility timeout.
    IN_FLIGHT_ELSEWHERE = "in_flight_elsewhere"
    AWAITING_EVIDENCE = "awaiting_evidence"  # a dead worker's send: back when the grace period for SES's events ends
    THROTTLED = "throttled"
    QUOTA_EXHAUSTED = "quota_exhausted"  # SES's daily quota: the job waits about ten minutes
    PACED = "paced"  # the pipeline's send rate left no send slot in this invocation: not claimed, back shortly
    AMBIGUOUS = "ambiguous"
    DEADLINE = "deadline"
    GROUP_BLOCKED = "group_blocked"
    LEDGER_UNAVAILABLE = "ledger_unavailable"
    DEAD_LETTER_FAILED = "dead_letter_failed"
    CONTENDED = "contended"
    INTERNAL_ERROR = "internal_error"

    @property
    def redeliver(self) -> bool:
        return self not in _ACKNOWLEDGED


_ACKNOWLEDGED = frozenset(
    {Outcome.SENT, Outcome.SENT_UNRECORDED, Outcome.DUPLICATE, Outcome.MARKED_UNKNOWN,
     Outcome.INVALID_MESSAGE, Outcome.REFUSED, Outcome.RECEIVES_EXHAUSTED}
)


class RecordResult(NamedTuple):
    message_id: str
    outcome: Outcome
    dedupe_key: str | None = None
    ses_message_id: str | None = None
    attempt: int | None = None
    reason: str | None = None
    key_conflict: bool = False
    retry_after_s: int | None = None  # redeliver after this long, not after the whole visibility timeout
    postponed_s: int | None = None  # a delayed copy of the job comes back after this long; this one is done

    @property
    def redeliver(self) -> bool:
        """Whether SQS should deliver this message again (a failure in the batch response)."""
        return self.outcome.redeliver and self.postponed_s is None


class OutcomeLog:
    """One JSON line per record on stdout, which CloudWatch Logs keeps as one event; with a pipeline name, the
    line is also an Embedded Metric Format document, so CloudWatch derives the metrics from it."""

    def __init__(self, stream: TextIO | None = None, pipeline: str | None = None) -> None:
        self._stream = stream
        self._pipeline = pipeline
        self._lock = threading.Lock()

    def write(self, result: RecordResult, receive_count: int, latency_ms: float = 0.0) -> None:
        line: dict[str, object] = {
            "level": "WARN" if result.redeliver or result.key_conflict else "INFO",
            "logger": "sendonce",
            "outcome": result.outcome.value,
            "dedupeKey": result.dedupe_key,
            "messageId": result.message_id,
            "sesMessageId": result.ses_message_id,
            "attempt": result.attempt,
            "receiveCount": receive_count,
        }
        if result.reason:
            line["reason"] = result.reason
        if result.key_conflict:
            line["keyConflict"] = True
        if result.postponed_s is not None:
            line["postponedSeconds"] = result.postponed_s
        if self._pipeline is not None:
            from .metrics import emf_fields

            line.update(emf_fields(result, self._pipeline, latency_ms, time.time_ns() // 1_000_000))
        text = json.dumps(line, ensure_ascii=False) + "\n"
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(text)
            stream.flush()
