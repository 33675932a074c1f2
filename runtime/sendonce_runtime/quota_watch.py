"""The quota watch: on a schedule, how much of SES's 24-hour sending quota the account has used. Handler
``sendonce_runtime.quota_watch.handler``.

It reads SESv2 ``GetAccount`` (``SendQuota``) and writes one JSON line that is also an Embedded Metric Format
document: ``QuotaUsedPercent`` (namespace ``sendonce``, dimension ``Pipeline``), with the quota's figures beside
it. It runs from an EventBridge schedule, never on the send path: the consumer makes no call for it.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from sendonce_contract.companion_configs import QuotaWatchConfig
from sendonce_contract.schema import Metric

from .metrics import emf_values
from .shell import JsonLog, Once

QUOTA_USED_PERCENT = Metric.QUOTA_USED_PERCENT


def used_percent(send_quota: dict[str, Any]) -> float:
    """SentLast24Hours as a share of Max24HourSend; 0 when the quota is unlimited (SES reports -1) or unset."""
    maximum = float(send_quota.get("Max24HourSend", 0) or 0)
    sent = float(send_quota.get("SentLast24Hours", 0) or 0)
    return round(100.0 * sent / maximum, 2) if maximum > 0 else 0.0


def watch(ses: Any, pipeline: str | None, stream: TextIO | None = None) -> dict[str, Any]:
    """Read the quota, write the metric line; returns the line."""
    quota = ses.get_account().get("SendQuota", {})
    percent = used_percent(quota)
    line: dict[str, Any] = {
        "level": "INFO", "logger": "sendonce.quota", QUOTA_USED_PERCENT: percent,
        "max24HourSend": quota.get("Max24HourSend"), "sentLast24Hours": quota.get("SentLast24Hours"),
        "maxSendRate": quota.get("MaxSendRate"),
    }
    if pipeline is not None:
        line.update(emf_values(pipeline, {QUOTA_USED_PERCENT: (percent, "Percent")}, time.time_ns() // 1_000_000))
    JsonLog(stream).emit(line)
    return line


def _build() -> tuple[Any, QuotaWatchConfig]:
    from . import aws_clients

    return aws_clients.recorder_client("sesv2"), QuotaWatchConfig.from_env()


_watch = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    ses, config = _watch.get()
    return watch(ses, config.pipeline_name)
