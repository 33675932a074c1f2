"""CloudWatch metrics in Embedded Metric Format: fields of the record's log line, so no API call is made.

Namespace ``sendonce``, one dimension ``Pipeline`` (set by the construct); with ``urgent_lane`` a record's metrics
are also published under ``Pipeline`` and ``Lane`` (the same line, a second dimension set), so the ``Pipeline``
ones stay both lanes' totals. Each record counts once in ``Records`` and once in the metric of its outcome;
``RecordLatency`` is its handling time in milliseconds. With ``tenant_metrics`` a record of a tenant's job is also
counted under ``Pipeline`` and ``Tenant``: one more set of metrics per tenant, each a custom metric CloudWatch bills
for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce_contract.schema import METRIC_DIMENSION as DIMENSION
from sendonce_contract.schema import METRIC_LANE_DIMENSION as LANE_DIMENSION
from sendonce_contract.schema import METRIC_NAMESPACE as NAMESPACE
from sendonce_contract.schema import TENANT_DIMENSION, Metric

from .outcome import MEANINGS, RecordResult

# Every count a record's line can carry: the outcomes' metrics come from their rows in the outcome table.
ALL_COUNTS = (Metric.RECORDS, Metric.KEY_CONFLICTS, Metric.DOUBLE_SENDS,
              *sorted({name for meaning in MEANINGS.values() for name in meaning.metrics}))


def emf_fields(result: RecordResult, pipeline: str, latency_ms: float, timestamp_ms: int,
               lane: str | None = None, by_tenant: bool = False) -> dict[str, Any]:
    counts = [Metric.RECORDS, *result.outcome.meaning.metrics]
    if result.key_conflict:
        counts.append(Metric.KEY_CONFLICTS)
    if result.double_send:  # the recorder's metric too, so the one DoubleSends alarm hears it
        counts.append(Metric.DOUBLE_SENDS)
    if result.suspected_double_of is not None:
        counts.append(Metric.SUSPECTED_DOUBLES)
    fields = emf_document(pipeline, counts, {Metric.RECORD_LATENCY: round(latency_ms, 3)}, timestamp_ms, lane)
    if by_tenant and result.tenant is not None:
        # The same values also per tenant: a second dimension set in the one document costs no second line.
        fields["_aws"]["CloudWatchMetrics"][0]["Dimensions"].append([DIMENSION, TENANT_DIMENSION])
        fields[TENANT_DIMENSION] = result.tenant
    return fields


def emf_document(
    pipeline: str, counts: list[str], milliseconds: Mapping[str, float], timestamp_ms: int, lane: str | None = None
) -> dict[str, Any]:
    """The fields that make a log line an EMF document: a count of 1 for each name in ``counts``, and timings;
    with a ``lane``, published per lane too."""
    metrics = [{"Name": name, "Unit": "Count"} for name in counts]
    metrics += [{"Name": name, "Unit": "Milliseconds"} for name in milliseconds]
    dimensions = [[DIMENSION], [DIMENSION, LANE_DIMENSION]] if lane else [[DIMENSION]]
    fields: dict[str, Any] = {
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": dimensions, "Metrics": metrics}],
        },
        DIMENSION: pipeline,
        **milliseconds,
    }
    if lane:
        fields[LANE_DIMENSION] = lane
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
