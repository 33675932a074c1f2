"""CloudWatch metrics in Embedded Metric Format: fields of the record's log line, so no API call is made.

Namespace ``sendonce``, one dimension ``Pipeline`` (set by the construct). Each record counts once in
``Records`` and once in the metric of its outcome; ``RecordLatency`` is its handling time in milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce_contract.schema import METRIC_DIMENSION as DIMENSION
from sendonce_contract.schema import METRIC_NAMESPACE as NAMESPACE
from sendonce_contract.schema import Metric

from .outcome import Outcome, RecordResult

OUTCOME_METRICS: dict[Outcome, tuple[str, ...]] = {
    Outcome.SENT: (Metric.EMAILS_SENT,),
    Outcome.SENT_UNRECORDED: (Metric.EMAILS_SENT, Metric.SENT_UNRECORDED),
    Outcome.DUPLICATE: (Metric.DUPLICATES_SKIPPED,),
    Outcome.CANCELLED: (Metric.CANCELLED,),
    Outcome.MARKED_UNKNOWN: (Metric.UNKNOWN_RECORDS,),
    Outcome.INVALID_MESSAGE: (Metric.POISON_MESSAGES,),
    Outcome.REFUSED: (Metric.SES_REFUSALS,),
    Outcome.IN_FLIGHT_ELSEWHERE: (Metric.IN_FLIGHT_RETRIES,),
    Outcome.AWAITING_EVIDENCE: (Metric.AWAITING_EVIDENCE,),
    Outcome.THROTTLED: (Metric.SES_THROTTLES,),
    Outcome.QUOTA_EXHAUSTED: (Metric.SES_THROTTLES, Metric.QUOTA_EXHAUSTED),
    Outcome.PACED: (Metric.PACED,),
    Outcome.SCHEDULED: (Metric.SCHEDULED,),
    Outcome.CONTRACT_TOO_NEW: (Metric.CONTRACT_TOO_NEW,),
    Outcome.RECEIVES_EXHAUSTED: (Metric.RECEIVES_EXHAUSTED,),
    Outcome.RECIPIENT_NOT_ALLOWED: (Metric.RECIPIENTS_NOT_ALLOWED,),
    Outcome.AMBIGUOUS: (Metric.AMBIGUOUS_SENDS,),
    Outcome.DEADLINE: (Metric.DEADLINE_DEFERRALS,),
    Outcome.GROUP_BLOCKED: (Metric.GROUP_BLOCKED,),
    Outcome.LEDGER_THROTTLED: (Metric.LEDGER_THROTTLES,),
    Outcome.LEDGER_UNAVAILABLE: (Metric.LEDGER_ERRORS,),
    Outcome.LEDGER_FAILED: (Metric.RECORD_ERRORS,),
    Outcome.DEAD_LETTER_FAILED: (Metric.RECORD_ERRORS,),
    Outcome.CONTENDED: (Metric.RECORD_ERRORS,),
    Outcome.INTERNAL_ERROR: (Metric.RECORD_ERRORS,),
}
ALL_COUNTS = (Metric.RECORDS, Metric.KEY_CONFLICTS, *sorted({m for names in OUTCOME_METRICS.values() for m in names}))


def emf_fields(result: RecordResult, pipeline: str, latency_ms: float, timestamp_ms: int) -> dict[str, Any]:
    counts = [Metric.RECORDS, *OUTCOME_METRICS[result.outcome]]
    if result.key_conflict:
        counts.append(Metric.KEY_CONFLICTS)
    return emf_document(pipeline, counts, {Metric.RECORD_LATENCY: round(latency_ms, 3)}, timestamp_ms)


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
