"""The Lambda entry point: wires the parts once per execution environment and returns the partial batch response."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sendonce_contract.schema import Metric

from . import aws_clients
from .batch import run_batch
from .checks import (
    AfterBatch,
    AttachmentsBucket,
    CarriedSend,
    Check,
    Expiry,
    JobAllowed,
    JobRule,
    OwnConfigurationSet,
    ParseJob,
    Schedule,
    TrackingUnsupported,
)
from .clock import Clock, Deadline, LambdaContext, SystemClock
from .dead_letter import DeadLetterQueue
from .ledger import DedupeLedger
from .outcome import RecordResult, Redeliver
from .outcome_log import OutcomeLog
from .processor import RecordProcessor
from .redelivery import Redelivery, Visibilities
from .ses_sender import SesSender, carries_tracking_overrides
from .ses_stops import SesStops, StopBoard
from .settings import Settings
from .shell import Once
from .sqs_record import SqsRecord

if TYPE_CHECKING:
    from .dead_letter_events import DeadLetterEvents
    from .lane_share import UrgentThrottleRetry
    from .send_rate import Pace, PaceSends
    from .waiting_room import WaitingRoom


class Consumer:
    """A processor and its settings; build one directly to inject clients and a clock (the tests do)."""

    def __init__(
        self,
        settings: Settings,
        processor: RecordProcessor,
        redelivery: Redelivery,
        log: OutcomeLog | None = None,
        dead_letter_events: DeadLetterEvents | None = None,
        after_batch: Sequence[AfterBatch] = (),
    ) -> None:
        self.settings = settings
        self.processor = processor
        self.log = log or _outcome_log(settings)
        self.redelivery = redelivery
        self.dead_letter_events = dead_letter_events
        self.after_batch = tuple(after_batch)  # run once a batch's records are decided (pacing's hold)

    @classmethod
    def from_settings(cls, settings: Settings, clock: Clock | None = None, log: OutcomeLog | None = None) -> Consumer:
        """The consumer a Lambda execution environment keeps: shared clients, the system clock."""
        return cls.from_clients(
            settings, aws_clients.dynamodb(settings), aws_clients.ses(settings), aws_clients.sqs(settings), clock, log,
            events=aws_clients.events(settings) if settings.outcome_bus else None,
            secrets=aws_clients.secrets(settings) if settings.key_secret_id else None,
            s3=aws_clients.s3(settings) if settings.attachments_bucket else None,
        )

    @classmethod
    def from_clients(
        cls,
        settings: Settings,
        dynamodb: Any,
        ses: Any,
        sqs: Any,
        clock: Clock | None = None,
        log: OutcomeLog | None = None,
        events: Any = None,
        secrets: Any = None,
        s3: Any = None,
    ) -> Consumer:
        clock, log = clock or SystemClock(), log or _outcome_log(settings)
        dead_letters = DeadLetterQueue(sqs, settings.dead_letter_queue_url, settings.fifo)
        ledger = DedupeLedger(dynamodb, settings.table_name, settings.dedupe_ttl_s, clock)
        pacing = _pacing(settings, dynamodb, ses, clock)
        paced = [pacing] if pacing is not None else []
        parse = _parse(settings, secrets)
        sender = SesSender(ses, settings.configuration_set, settings.pipeline_tag, settings.ses_tenants,
                           settings.sender_identity)
        ses_call_ms = int((settings.budget.ses_connect_timeout_s + settings.budget.ses_read_timeout_s) * 1000)
        stops = SesStops(StopBoard(dynamodb, settings.table_name, settings.pipeline_name, settings.lane, clock),
                         clock, parse.tenant, sender.tenant_disabled if settings.ses_tenants else None,
                         ses_call_ms + settings.budget.ledger_call_ms)
        processor = RecordProcessor(
            settings,
            ledger,
            sender,
            dead_letters,
            clock,
            parse,
            [*_checks(settings, ledger, clock, parse, s3, stops, dynamodb, _sdk_lacking_tracking(ses)),
             *_urgent_work_mark(settings, dynamodb, clock, log), *paced],
            _throttle_retry(settings),
            stops,
        )
        redelivery = Redelivery(sqs, settings.queue_url, settings.fifo, dead_letters, settings.max_receive_count,
                                call_ms=settings.budget.ledger_call_ms, clock=clock,
                                retention_s=settings.queue_retention_s, room=_waiting_room(settings, dynamodb))
        return cls(settings, processor, redelivery, log, _dead_letter_events(settings, events, clock),
                   after_batch=paced)

    def handle(self, event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        """A batch, step by step (docs: architecture, one send): each record decided and its way back arranged, the
        batch's parked jobs and visibilities set together, then what comes after a batch; the records SQS should
        deliver again, as Lambda's partial batch response."""
        deadline = Deadline(context)
        records = [SqsRecord.from_event(r) for r in event.get("Records", [])]
        waits = _BatchWaits()
        self.redelivery.retire_superseded(records)  # a copy deletes the message it replaces (none without copies)
        results = run_batch(records, lambda record: self._one(record, deadline, waits), self.settings.parallelism,
                            self.settings.fifo)
        results = self._park(waits.parked, records, results, deadline, waits.later)
        self.redelivery.set_visibilities(waits.later, deadline)
        self._after_batch(results, deadline)
        return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in results if r.redeliver]}

    def _one(self, record: SqsRecord, deadline: Deadline, waits: _BatchWaits) -> RecordResult:
        """One record: decided by the processor (parse, checks, claim, send, record), then its way back arranged
        (``Redelivery.settle``) and its log line written; a parked job is left for ``_park``."""
        started = time.perf_counter()
        decided = self.processor.process(record, deadline)
        if isinstance(decided, Redeliver) and self.redelivery.parks_with_its_batch(decided):
            waits.parked.append((record, decided, started))
            return decided.result
        result = self.redelivery.settle(record, decided, deadline, waits.later)
        self.log.write(result, record.receive_count, (time.perf_counter() - started) * 1000)
        return result

    def _park(self, parked: list[tuple[SqsRecord, Redeliver, float]], records: list[SqsRecord],
              results: list[RecordResult], deadline: Deadline, later: Visibilities) -> list[RecordResult]:
        """SES's stops: the batch's parked jobs written to the waiting room (or copied) together, a fraction of a
        request each, their results in the batch's: matched by record, not message id, which SQS may deliver twice
        in one batch."""
        if not parked:
            return results
        settled = self.redelivery.park([(record, decided) for record, decided, _ in parked], deadline, later)
        by_record: dict[int, RecordResult] = {}
        for (record, _, started), result in zip(parked, settled, strict=True):
            self.log.write(result, record.receive_count, (time.perf_counter() - started) * 1000)
            by_record[id(record)] = result
        return [by_record.get(id(record), result) for record, result in zip(records, results, strict=True)]

    def _after_batch(self, results: list[RecordResult], deadline: Deadline) -> None:
        """What only some deployments do once a batch is decided: the outcome events of its dead letters, and a
        paced lane's hold before its next batch."""
        if self.dead_letter_events is not None:
            unpublished = self.dead_letter_events.publish(results, deadline)
            if unpublished:
                self.log.note("outcome_events_failed", Metric.OUTCOME_EVENTS_FAILED, unpublished)
        for step in self.after_batch:
            step.after_batch(deadline, results)


class _BatchWaits:
    """What a batch's records leave to be done together once each is decided: the parked jobs, and the records that
    come back by their visibility (their waits set in one request per ten)."""

    __slots__ = ("later", "parked")

    def __init__(self) -> None:
        self.parked: list[tuple[SqsRecord, Redeliver, float]] = []
        self.later: Visibilities = []


def _waiting_room(settings: Settings, dynamodb: Any) -> WaitingRoom | None:
    """Where a job scheduled beyond SQS's longest delay, or parked while SES stops sending, waits; none on a FIFO
    queue (which refuses sendAt, and whose jobs keep their group's order by waiting in their queue)."""
    if not settings.waiting_room_table or settings.fifo:
        return None
    from sendonce_contract.priority import Priority

    from .waiting_room import WaitingRoom  # only a deployment with a room compiles it at a cold start

    return WaitingRoom(dynamodb, settings.waiting_room_table, settings.lane or Priority.BULK.value)


def _sdk_lacking_tracking(ses: Any) -> str | None:
    """The SDK's version when it predates SendEmail's ConfigurationOverrides (None: it has them)."""
    if ses is None or carries_tracking_overrides(ses):
        return None
    import botocore

    return str(botocore.__version__)


def _checks(settings: Settings, ledger: DedupeLedger, clock: Clock, parse: ParseJob, s3: Any = None,
            stops: SesStops | None = None, dynamodb: Any = None, sdk_lacking_tracking: str | None = None,
            ) -> list[Check]:
    """The checks between a job's parsing and its pacing (the last check, ``_pacing``), in order; those this
    deployment does not use are left out. The parts only some deployments use are imported by those only: a cold
    start compiles what it runs."""
    checks: list[Check] = [JobAllowed(_job_rules(settings, sdk_lacking_tracking))]
    if not settings.fifo:
        checks.append(Schedule(clock, settings.dedupe_ttl_s))
    checks.append(CarriedSend(ledger))
    # After a carried completion is written: that one was sent.
    checks.append(Expiry(clock, ledger, parse.tenant, settings.max_job_age_s))
    if stops is not None:  # after a carried completion is written; before an attachment is read for nothing
        checks.append(stops)
    if settings.guarded:  # after the stops: a parked job counts when it goes, not each time it waits
        from .double_guard import MisKeyedGuard

        checks.append(MisKeyedGuard(settings, dynamodb if dynamodb is not None else aws_clients.dynamodb(settings),
                                    clock, parse.key, parse.tenant))
    if settings.attachments_bucket:
        from .attachment_reader import ReadAttachments

        checks.append(ReadAttachments(s3 if s3 is not None else aws_clients.s3(settings), settings.budget))
    return checks


def _job_rules(settings: Settings, sdk_lacking_tracking: str | None) -> list[JobRule]:
    """What this deployment lets a job ask for (``JobAllowed``), in order; rules it does not need are left out."""
    rules: list[JobRule] = []
    if settings.allowed_recipients:
        from .recipients_check import RecipientsAllowed

        rules.append(RecipientsAllowed(settings.allowed_recipients))
    if settings.ses_events:
        rules.append(OwnConfigurationSet(settings.configuration_set))
    if sdk_lacking_tracking is not None:
        rules.append(TrackingUnsupported(sdk_lacking_tracking))
    if settings.fifo:
        from .fifo_check import NoSendAtOnFifo

        rules.append(NoSendAtOnFifo())
    rules.append(AttachmentsBucket(settings.attachments_bucket))
    return rules


def _pacing(settings: Settings, dynamodb: Any, ses: Any = None, clock: Clock | None = None) -> PaceSends | None:
    """With a send rate: the last check before the claim, and the hold after a batch (``send_rate``)."""
    if not settings.max_send_rate:
        return None
    from sendonce_contract.priority import Priority

    from .send_rate import PaceSends

    clock = clock or SystemClock()
    return PaceSends(_pace(settings, dynamodb, clock, ses), settings.budget.record_budget_ms,
                     hold_after_send=settings.lane == Priority.URGENT.value, now_ms=clock.now_ms)


def _outcome_log(settings: Settings) -> OutcomeLog:
    return OutcomeLog(pipeline=settings.pipeline_name, lane=settings.lane, by_tenant=settings.tenant_metrics)


def _urgent_work_mark(settings: Settings, dynamodb: Any, clock: Clock, log: OutcomeLog) -> list[Check]:
    """On the urgent lane of a paced pipeline: its work item written as it takes a record, which bulk reads to
    know whether it may use the urgent share (``lane_share``)."""
    from sendonce_contract.priority import Priority

    if settings.lane != Priority.URGENT.value or not settings.max_send_rate or dynamodb is None:
        return []
    from .lane_share import UrgentWorkMark

    budget = settings.budget
    return [UrgentWorkMark(dynamodb, settings.table_name, settings.pipeline_name, clock.now_ms,
                           needed_ms=budget.record_budget_ms + budget.ledger_call_ms,
                           unwritten=lambda: log.note("lane_work_unwritten", Metric.LANE_WORK_UNWRITTEN, 1))]


def _pace(settings: Settings, dynamodb: Any, clock: Clock, ses: Any = None) -> Pace:
    """The instance's bucket; on the bulk lane of a pipeline with an urgent lane, also the urgent lane's share,
    lent while the urgent lane's work item says it is idle (``lane_share``)."""
    from .send_rate import TokenBucket

    assert settings.max_send_rate
    ceiling = None
    if settings.planned_send_rate and ses is not None:
        from .ses_rate import SesRateCeiling

        ceiling = SesRateCeiling(ses, settings.planned_send_rate).factor
    own = TokenBucket(settings.max_send_rate, ceiling=ceiling)
    if settings.lent_send_rate and dynamodb is not None:
        from .lane_share import LendingBuckets, UrgentLaneWatch

        watch = UrgentLaneWatch(dynamodb, settings.table_name, settings.pipeline_name, clock.now_ms)
        return LendingBuckets(own, TokenBucket(settings.lent_send_rate, ceiling=ceiling), watch.busy)
    return own


def _throttle_retry(settings: Settings) -> UrgentThrottleRetry | None:
    """The urgent lane's consumer tries a throttled send again while bulk gives its loan back (``lane_share``)."""
    from sendonce_contract.priority import Priority

    if settings.lane != Priority.URGENT.value:
        return None
    from .lane_share import UrgentThrottleRetry

    return UrgentThrottleRetry(settings.budget.record_budget_ms)


def _parse(settings: Settings, secrets: Any) -> ParseJob:
    if not settings.key_secret_id:
        return ParseJob()
    from .key_privacy import ParsePrivateJob, PrivateKeys

    return ParsePrivateJob(PrivateKeys(secrets, settings.key_secret_id))


def _dead_letter_events(settings: Settings, events: Any, clock: Clock) -> DeadLetterEvents | None:
    if events is None or not settings.outcome_bus or not settings.pipeline_tag:
        return None
    from .dead_letter_events import DeadLetterEvents

    return DeadLetterEvents(events, settings.outcome_bus, settings.pipeline_tag, clock)


_consumer = Once(lambda: Consumer.from_settings(Settings.from_env()))


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return _consumer.get().handle(event, context)
