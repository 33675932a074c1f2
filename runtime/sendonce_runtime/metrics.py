"""CloudWatch metrics in Embedded Metric Format: fields of the record's log line, so no API call is made.

Namespace ``sendonce``, one dimension ``Pipeline`` (set by the construct). Each record counts once in
``Records`` and once in the metric of its outcome; ``RecordLatency`` is its handling time in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce_contract.schema import METRIC_DIMENSION as DIMENSION
from sendonce_contract.schema import METRIC_NAMESPACE as NAMESPACE

from .outcome import Outcome, RecordResult

OUTCOME_METRICS: dict[Outcome, tuple[str, ...]] = {
    Outcome.SENT: ("EmailsSent",),
    Outcome.SENT_UNRECORDED: ("EmailsSent", "SentUnrecorded"),
    Outcome.DUPLICATE: ("DuplicatesSkipped",),
    Outcome.CANCELLED: ("Cancelled",),
    Outcome.MARKED_UNKNOWN: ("UnknownRecords",),
    Outcome.INVALID_MESSAGE: ("PoisonMessages",),
    Outcome.REFUSED: ("SesRefusals",),
    Outcome.IN_FLIGHT_ELSEWHERE: ("InFlightRetries",),
    Outcome.AWAITING_EVIDENCE: ("AwaitingEvidence",),
    Outcome.THROTTLED: ("SesThrottles",),
    Outcome.QUOTA_EXHAUSTED: ("SesThrottles", "QuotaExhausted"),
    Outcome.PACED: ("Paced",),
    Outcome.SCHEDULED: ("Scheduled",),
    Outcome.CONTRACT_TOO_NEW: ("ContractTooNew",),
    Outcome.RECEIVES_EXHAUSTED: ("ReceivesExhausted",),
    Outcome.RECIPIENT_NOT_ALLOWED: ("RecipientsNotAllowed",),
    Outcome.AMBIGUOUS: ("AmbiguousSends",),
    Outcome.DEADLINE: ("DeadlineDeferrals",),
    Outcome.GROUP_BLOCKED: ("GroupBlocked",),
    Outcome.LEDGER_THROTTLED: ("LedgerThrottles",),
    Outcome.LEDGER_UNAVAILABLE: ("LedgerErrors",),
    Outcome.LEDGER_FAILED: ("RecordErrors",),
    Outcome.DEAD_LETTER_FAILED: ("RecordErrors",),
    Outcome.CONTENDED: ("RecordErrors",),
    Outcome.INTERNAL_ERROR: ("RecordErrors",),
}
ALL_COUNTS = ("Records", "KeyConflicts", *sorted({m for names in OUTCOME_METRICS.values() for m in names}))


def emf_fields(result: RecordResult, pipeline: str, latency_ms: float, timestamp_ms: int) -> dict[str, Any]:
    counts = ["Records", *OUTCOME_METRICS[result.outcome]]
    if result.key_conflict:
        counts.append("KeyConflicts")
    return emf_document(pipeline, counts, {"RecordLatency": round(latency_ms, 3)}, timestamp_ms)


def emf_document(
    pipeline: str, counts: list[str], milliseconds: Mapping[str, float], timestamp_ms: int
) -> dict[str, Any]:
    """The fields that make a log line an EMF document: a count of 1 for each name in ``counts``, and timings."""
    metrics = [{"Name": name, "Unit": "Count"} for name in counts]
    metrics += [{"Name": name, "Unit": "Milliseconds"} for name in milliseconds]
    fields: dict[str, Any] = {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [[DIMENSION]], "Metrics": metrics}],
        },
        DIMENSION: pipeline,
        **milliseconds,
    }
    fields.update({name: 1 for name in counts})
    return fields


def emf_values(pipeline: str, values: Mapping[str, tuple[float, str]], timestamp_ms: int) -> dict[str, Any]:
    """The fields that make a log line an EMF document of measured values: ``{name: (value, unit)}``."""
    return {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [[DIMENSION]],
                                   "Metrics": [{"Name": name, "Unit": unit} for name, (_, unit) in values.items()]}],
        },
        DIMENSION: pipeline,
        **{name: value for name, (value, _) in values.items()},
    }
