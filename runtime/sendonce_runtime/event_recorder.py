"""The recorder: SES's events from the evidence queue, written onto the ledger. Handler
``sendonce_runtime.event_recorder.handler``.

A malformed event goes to the recorder's dead-letter queue with its reason and never fails the batch; a ledger
error fails its record only, so the event source brings it back. Each event writes one JSON line that is also
an Embedded Metric Format document (namespace ``sendonce``, dimension ``Pipeline``).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.schema import SES_EVENTS_BY_NAME, Ledger, ReasonCode, Status

from .clock import Clock, SystemClock
from .dead_letter import DeadLetterQueue
from .evidence import EvidenceLedger, Recorded, Verdict
from .metrics import emf_document
from .ses_events import IgnoredEvent, MalformedEvent, SesEvent, parse_event
from .settings import SettingsError
from .sqs_record import SqsRecord

VERDICT_METRICS = {Verdict.UNKNOWN_KEY: "UnknownKeyEvents", Verdict.EXPIRED_KEY: "ExpiredKeyEvents"}


@dataclass(frozen=True)
class RecorderSettings:
    table_name: str
    dead_letter_queue_url: str
    pipeline_tag: str | None = None
    pipeline_name: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RecorderSettings:
        missing = [n for n in ("SENDONCE_TABLE_NAME", "SENDONCE_EVIDENCE_DLQ_URL") if not env.get(n)]
        if missing:
            raise SettingsError(f"environment variables {', '.join(missing)} are not set; deploy with the construct")
        return cls(env["SENDONCE_TABLE_NAME"], env["SENDONCE_EVIDENCE_DLQ_URL"],
                   env.get("SENDONCE_PIPELINE_TAG") or None, env.get("SENDONCE_PIPELINE_NAME") or None)


class EventLog:
    def __init__(self, stream: TextIO | None = None, pipeline: str | None = None) -> None:
        self._stream = stream
        self._pipeline = pipeline
        self._lock = threading.Lock()

    def write(self, line: dict[str, Any], counts: list[str], latency_ms: int | None = None) -> None:
        if self._pipeline is not None:
            timings = {} if latency_ms is None else {"ConfirmationLatency": latency_ms}
            line.update(emf_document(self._pipeline, counts, timings, time.time_ns() // 1_000_000))
        text = json.dumps(line, ensure_ascii=False) + "\n"
        with self._lock:
            (self._stream or sys.stdout).write(text)


class EventRecorder:
    def __init__(self, settings: RecorderSettings, ledger: EvidenceLedger, dead_letters: DeadLetterQueue,
                 log: EventLog, clock: Clock | None = None) -> None:
        self.settings = settings
        self._ledger = ledger
        self._dead_letters = dead_letters
        self.log = log
        self._clock = clock or SystemClock()

    @classmethod
    def from_clients(cls, settings: RecorderSettings, dynamodb: Any, sqs: Any, clock: Clock | None = None,
                     log: EventLog | None = None) -> EventRecorder:
        clock = clock or SystemClock()
        return cls(settings, EvidenceLedger(dynamodb, settings.table_name, clock),
                   DeadLetterQueue(sqs, settings.dead_letter_queue_url, fifo=False),
                   log or EventLog(pipeline=settings.pipeline_name), clock)

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        failed = [r.message_id for r in map(SqsRecord.from_event, event.get("Records", [])) if not self._one(r)]
        return {"batchItemFailures": [{"itemIdentifier": message_id} for message_id in failed]}

    def _one(self, record: SqsRecord) -> bool:
        """True when the record is done with (recorded, ignored or dead-lettered)."""
        try:
            parsed = parse_event(record.body)
        except IgnoredEvent as kind:
            self.log.write({"level": "INFO", "logger": "sendonce.evidence", "outcome": "ignored",
                            "eventType": str(kind)}, ["IgnoredEvents"])
            return True
        except MalformedEvent as error:
            self.log.write({"level": "WARN", "logger": "sendonce.evidence", "outcome": "malformed",
                            "reason": error.reason, "messageId": record.message_id}, ["MalformedEvents"])
            return self._dead_letters.send(record, ReasonCode.MALFORMED_EVENT, error.reason, None)
        if self.settings.pipeline_tag is not None and parsed.pipeline != self.settings.pipeline_tag:
            self.log.write(_line(parsed, "other_pipeline"), ["OtherPipelineEvents"])
            return True
        try:
            recorded = self._ledger.record(parsed)
        except (ClientError, BotoCoreError) as error:
            line = _line(parsed, "ledger_unavailable")
            line.update(level="WARN", reason=f"{type(error).__name__}: {error}")
            self.log.write(line, ["RecorderErrors"])
            return False
        self._log_recorded(parsed, recorded)
        return True

    def _log_recorded(self, event: SesEvent, recorded: Recorded) -> None:
        if recorded.verdict is not Verdict.RECORDED:
            self.log.write(_line(event, recorded.verdict.value), [VERDICT_METRICS[recorded.verdict]])
            return
        line = _line(event, "double_send" if recorded.double_send else "recorded")
        line.update(wasStatus=recorded.was_status, sesMessageIds=list(recorded.ses_message_ids))
        counts = ["EvidenceEvents", SES_EVENTS_BY_NAME[event.event_type].metric]
        latency = None
        if recorded.first_evidence:
            counts.append("SendsConfirmed")
            latency = max(0, self._clock.now_ms() - event.sent_at_ms)
            if recorded.was_status in (Status.IN_FLIGHT.value, Status.UNKNOWN.value):
                counts.append("UndecidedSendsSettled")
        if recorded.double_send:
            line["level"] = "ERROR"
            counts.append("DoubleSends")
        self.log.write(line, counts, latency)


def _line(event: SesEvent, outcome: str) -> dict[str, Any]:
    return {"level": "INFO", "logger": "sendonce.evidence", "outcome": outcome, "eventType": event.event_type,
            Ledger.KEY: event.dedupe_key, Ledger.SES_MESSAGE_ID: event.ses_message_id}


_lock = threading.Lock()
_recorder: EventRecorder | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    global _recorder
    with _lock:
        if _recorder is None:
            from . import aws_clients

            settings = RecorderSettings.from_env()
            _recorder = EventRecorder.from_clients(settings, aws_clients.recorder_client("dynamodb"),
                                                   aws_clients.recorder_client("sqs"))
    return _recorder.handle(event, context)
