"""The recorder: SES's events from the evidence queue, written onto the ledger. Handler
``sendonce_runtime.event_recorder.handler``.

A malformed event goes to the recorder's dead-letter queue with its reason and never fails the batch; a ledger
error fails its record only, so the event source brings it back. Each event writes one JSON line that is also
an Embedded Metric Format document (namespace ``sendonce``, dimension ``Pipeline``).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.companion_configs import RecorderConfig
from sendonce_contract.schema import SES_EVENTS_BY_NAME, Ledger, Metric, ReasonCode, Status

from .clock import Clock, SystemClock
from .dead_letter import DeadLetterQueue
from .evidence import EvidenceLedger, Recorded, Verdict
from .ses_events import IgnoredEvent, MalformedEvent, SesEvent, parse_event
from .shell import JsonLog, Once
from .sqs_record import SqsRecord

VERDICT_METRICS = {Verdict.UNKNOWN_KEY: Metric.UNKNOWN_KEY_EVENTS, Verdict.EXPIRED_KEY: Metric.EXPIRED_KEY_EVENTS,
                   Verdict.EARLIER_LIFETIME: Metric.EARLIER_LIFETIME_EVENTS}
RecorderSettings = RecorderConfig  # the recorder's environment
EventLog = JsonLog  # the recorder's log: one line per event


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
                            "eventType": str(kind)}, [Metric.IGNORED_EVENTS])
            return True
        except MalformedEvent as error:
            self.log.write({"level": "WARN", "logger": "sendonce.evidence", "outcome": "malformed",
                            "reason": error.reason, "messageId": record.message_id}, [Metric.MALFORMED_EVENTS])
            return self._dead_letters.send(record, ReasonCode.MALFORMED_EVENT, error.reason, None)
        if self.settings.pipeline_tag is not None and parsed.pipeline != self.settings.pipeline_tag:
            self.log.write(_line(parsed, "other_pipeline"), [Metric.OTHER_PIPELINE_EVENTS])
            return True
        try:
            recorded = self._ledger.record(parsed)
        except (ClientError, BotoCoreError) as error:
            line = _line(parsed, "ledger_unavailable")
            line.update(level="WARN", reason=f"{type(error).__name__}: {error}")
            self.log.write(line, [Metric.RECORDER_ERRORS])
            return False
        self._log_recorded(parsed, recorded)
        return True

    def _log_recorded(self, event: SesEvent, recorded: Recorded) -> None:
        if recorded.verdict is not Verdict.RECORDED:
            self.log.write(_line(event, recorded.verdict.value), [VERDICT_METRICS[recorded.verdict]])
            return
        line = _line(event, "double_send" if recorded.double_send else "recorded")
        line.update(wasStatus=recorded.was_status, sesMessageIds=list(recorded.ses_message_ids))
        counts = [Metric.EVIDENCE_EVENTS, SES_EVENTS_BY_NAME[event.event_type].metric]
        latency = None
        if recorded.first_evidence:
            counts.append(Metric.SENDS_CONFIRMED)
            latency = max(0, self._clock.now_ms() - event.sent_at_ms)
            if recorded.was_status in (Status.IN_FLIGHT.value, Status.UNKNOWN.value):
                counts.append(Metric.UNDECIDED_SENDS_SETTLED)
        if recorded.double_send:
            line["level"] = "ERROR"
            counts.append(Metric.DOUBLE_SENDS)
        self.log.write(line, counts, {} if latency is None else {Metric.CONFIRMATION_LATENCY: latency})


def _line(event: SesEvent, outcome: str) -> dict[str, Any]:
    return {"level": "INFO", "logger": "sendonce.evidence", "outcome": outcome, "eventType": event.event_type,
            Ledger.KEY: event.dedupe_key, Ledger.SES_MESSAGE_ID: event.ses_message_id}


def _build() -> EventRecorder:
    from . import aws_clients

    return EventRecorder.from_clients(RecorderConfig.from_env(), aws_clients.recorder_client("dynamodb"),
                                      aws_clients.recorder_client("sqs"))


_recorder = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _recorder.get().handle(event, context)
