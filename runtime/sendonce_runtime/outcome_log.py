"""One JSON line per record on stdout, which CloudWatch Logs keeps as one event; with a pipeline name, the line is
also an Embedded Metric Format document, so CloudWatch derives the metrics from it."""

from __future__ import annotations

import time
from typing import TextIO

from sendonce_contract.address import redact_addresses
from sendonce_contract.schema import Ledger

from .metrics import emf_fields
from .outcome import RecordResult
from .shell import JsonLog


class OutcomeLog:
    """One JSON line per record on stdout, which CloudWatch Logs keeps as one event; with a pipeline name, the
    line is also an Embedded Metric Format document, so CloudWatch derives the metrics from it."""

    def __init__(self, stream: TextIO | None = None, pipeline: str | None = None, lane: str | None = None,
                 by_tenant: bool = False) -> None:
        self._stream = stream
        self._log = JsonLog(stream, pipeline)
        self._pipeline = pipeline
        self._lane = lane  # with urgent_lane: each record's metrics per lane too
        self._by_tenant = by_tenant  # tenant_metrics: the metrics also per tenant

    def note(self, outcome: str, count_name: str, count: int) -> None:
        """A line about the batch, not a record (``count`` of ``count_name``), e.g. outcome events not published."""
        self._log.write({"level": "WARN", "logger": "sendonce", "outcome": outcome}, [count_name],
                        values={count_name: count})

    def write(self, result: RecordResult, receive_count: int, latency_ms: float = 0.0) -> None:
        line: dict[str, object] = {
            "level": "ERROR" if result.double_send else
            "WARN" if result.redeliver or result.key_conflict or result.suspected_double_of else "INFO",
            "logger": "sendonce",
            "outcome": result.outcome.value,
            Ledger.KEY: result.dedupe_key,
            "messageId": result.message_id,
            Ledger.SES_MESSAGE_ID: result.ses_message_id,
            "attempt": result.attempt,
            "receiveCount": receive_count,
        }
        if result.tenant is not None:
            line[Ledger.TENANT] = result.tenant
        if result.reason:
            # A reason can quote what it refused (an invalid address): a log line never carries an address.
            line["reason"] = redact_addresses(result.reason)
        if result.key_conflict:
            line["keyConflict"] = True
        if result.double_send:
            line["doubleSend"] = True
        if result.suspected_double_of is not None:
            line["suspectedDoubleOf"] = result.suspected_double_of
        if result.postponed_s is not None:
            line["postponedSeconds"] = result.postponed_s
        if self._pipeline is not None:
            line.update(emf_fields(result, self._pipeline, latency_ms, time.time_ns() // 1_000_000, self._lane,
                                   self._by_tenant))
        self._log.emit(line)
