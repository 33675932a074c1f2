"""The checks a job passes between its parsing and its claim, one small step each, run in the order the handler
lists them. A step takes the record's :class:`Delivery` and either decides its result or passes it on to the rest;
a check a deployment does not use is left out of the list when the handler wires it, never tested per record.

A rule that reads only the job and the deployment (a bucket, a configuration set) is not a step of its own but one
of :class:`JobAllowed`'s rules: a function of the parsed job that returns the refusal or None.

A new check is one step here (or, for a check only some deployments use, in the module of what it uses, which
only those import: :mod:`.send_rate`'s pacing, :mod:`.key_privacy`'s parsing; and the rules
:mod:`.recipients_check` and :mod:`.fifo_check`), its place in the handler's list and, if it decides a new
outcome, that outcome's row in :mod:`.outcome`. A check that also acts once its batch is done (pacing holds the
invocation for its next token) is an :class:`AfterBatch` too, and the handler lists it there as well.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from sendonce_contract.job_lifetime import MAX_SEND_AT_AHEAD_S, send_at_horizon_s
from sendonce_contract.message import ContractTooNew, InvalidMessage, ParsedJob, parse_job
from sendonce_contract.schema import EXPIRES_AT_FIELD, TRACKING_FIELD

from .aws_errors import LEDGER_ERRORS, describe, ledger_outcome
from .clock import Clock, Deadline
from .ledger import DedupeLedger
from .outcome import OUTCOME_OF_REASON, Outcome, RecordResult, Redeliver, Refusal, Verdict, amended
from .settled_key import settled_result
from .sqs_record import SqsRecord


class Delivery:
    """One record on its way to a send: the message, its parsed job and the invocation's deadline."""

    __slots__ = ("deadline", "expires_at_ms", "job", "record")

    def __init__(self, record: SqsRecord, job: ParsedJob, deadline: Deadline, expires_at_ms: int | None = None,
                 ) -> None:
        self.record = record
        self.job = job
        self.deadline = deadline
        # When the job stops being worth sending (its expiresAt, or its lane's age limit), once ``Expiry`` has
        # read it: a later step that waits (pacing) never waits past it.
        self.expires_at_ms = expires_at_ms

    def with_job(self, job: ParsedJob) -> Delivery:
        """The same delivery carrying ``job`` (a step that filled in what the job refers to, as its attachments)."""
        return Delivery(self.record, job, self.deadline, self.expires_at_ms)

    def expiring_at(self, expires_at_ms: int | None) -> Delivery:
        return Delivery(self.record, self.job, self.deadline, expires_at_ms)

    def result(self, outcome: Outcome, reason: str) -> RecordResult:
        return RecordResult(self.record.message_id, outcome, self.job.dedupe_key, reason=reason)

    def refuse(self, outcome: Outcome, reason: str) -> Refusal:
        """Into the DLQ with ``outcome``'s reason code."""
        return Refusal(self.result(outcome, reason))


Rest = Callable[[Delivery], Verdict]
Check = Callable[[Delivery, Rest], Verdict]  # decides the result, or returns rest(delivery) to pass it on
JobRefusal = tuple[Outcome, str]  # the DLQ's reason code and reason
JobRule = Callable[[ParsedJob], "JobRefusal | None"]  # one of JobAllowed's rules: a refusal, or None to allow


class AfterBatch(Protocol):
    """A step the handler runs once a batch's records are decided, before the invocation answers."""

    def after_batch(self, deadline: Deadline, results: Sequence[RecordResult]) -> float:
        """Act on the batch's ``results``; the seconds the invocation was held."""
        ...


def chain(checks: Sequence[Check], last: Rest) -> Rest:
    """``checks`` in order, each handing on to the next, then ``last``."""
    run = last
    for check in reversed(checks):
        run = _link(check, run)
    return run


def _link(check: Check, rest: Rest) -> Rest:
    return lambda delivery: check(delivery, rest)


class ParseJob:
    """The record's body as a job of the message contract; a body that breaks it goes to the DLQ with the reason,
    and a job of a newer contract waits for the consumer's upgrade. The keys stay as the job names them."""

    def __call__(self, record: SqsRecord) -> ParsedJob | Verdict:
        try:
            return self.job(parse_job(record.body, record.message_id))
        except InvalidMessage as error:
            key, reason = self.invalid(record.body, error)
            return Refusal(RecordResult(record.message_id, OUTCOME_OF_REASON[error.code], key, reason=reason))
        except ContractTooNew as error:
            too_new_key = error.dedupe_key
            if too_new_key is not None:
                too_new_key = self.key(too_new_key)
            return Redeliver(RecordResult(record.message_id, Outcome.CONTRACT_TOO_NEW, too_new_key,
                                          reason=str(error)))

    def job(self, job: ParsedJob) -> ParsedJob:
        return job

    def key(self, dedupe_key: str) -> str:
        return dedupe_key

    def tenant(self, job: ParsedJob) -> str | None:
        """The job's tenant as the logs, the ledger and the events show it."""
        return job.tenant

    def invalid(self, body: str, error: InvalidMessage) -> tuple[str | None, str]:
        """The DLQ's key attribute and reason for a body that broke the contract."""
        return error.dedupe_key, error.reason


class JobAllowed:
    """What this deployment lets a job ask for (its recipients, configuration set, tracking, sendAt, attachments'
    bucket), as one step: its rules, each a function of the parsed job alone, in the order the handler lists them;
    the first that refuses the job sends it to the DLQ with its reason, before anything is read, claimed or sent."""

    def __init__(self, rules: Sequence[JobRule]) -> None:
        self.rules = tuple(rules)

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        for rule in self.rules:
            refused = rule(delivery.job)
            if refused is not None:
                return delivery.refuse(*refused)
        return rest(delivery)


class OwnConfigurationSet:
    """With SES's events on, a job may name no configuration set but the pipeline's own."""

    def __init__(self, configuration_set: str | None) -> None:
        self._configuration_set = configuration_set

    def __call__(self, job: ParsedJob) -> JobRefusal | None:
        if job.configuration_set in (None, self._configuration_set):
            return None
        return (Outcome.INVALID_MESSAGE,
                f"configurationSet {job.configuration_set!r} is refused: SES's events through the pipeline's own "
                "set are the evidence each email was sent once; drop the field (or deploy with ses_events=False)")


class TrackingUnsupported:
    """Wired only where this consumer's AWS SDK (the Lambda runtime's boto3) predates SendEmail's
    ``ConfigurationOverrides``: a job setting its own tracking is refused with the reason before its claim, rather
    than sent tracked against its producer's word; a redrive sends it once the runtime's SDK has it."""

    def __init__(self, sdk_version: str) -> None:
        self._sdk_version = sdk_version

    def __call__(self, job: ParsedJob) -> JobRefusal | None:
        if job.tracking is None:
            return None
        return (Outcome.INVALID_MESSAGE,
                f"{TRACKING_FIELD} needs SendEmail's ConfigurationOverrides (SES, August 2026), which this consumer's "
                f"AWS SDK (botocore {self._sdk_version}, the Lambda runtime's) does not have: redrive it once the "
                f"function runs on a runtime whose SDK does, or send it without {TRACKING_FIELD}")


class AttachmentsBucket:
    """An s3 attachment is read from the pipeline's attachments bucket only: any other bucket, or any bucket when
    the pipeline has none, is refused before anything is read."""

    def __init__(self, bucket: str | None) -> None:
        self._bucket = bucket

    def __call__(self, job: ParsedJob) -> JobRefusal | None:
        for attachment in job.s3_attachments:
            assert attachment.s3 is not None
            if attachment.s3.bucket != self._bucket:
                allowed = (f"only its attachments bucket {self._bucket!r}" if self._bucket else
                           "none: deploy with attachments_bucket, or send the file as content")
                return (Outcome.ATTACHMENT_BUCKET_REFUSED,
                        f"attachment {attachment.file_name!r} is in bucket {attachment.s3.bucket!r}; this pipeline "
                        f"reads {allowed}; nothing was sent")
        return None


class Schedule:
    """Not claimed before its time: a job whose sendAt is ahead waits as delayed copies, so its key stays free
    to cancel; one further ahead than the pipeline takes (its dedupe_ttl, at most 30 days) is refused."""

    def __init__(self, clock: Clock, dedupe_ttl_s: int) -> None:
        self._clock = clock
        self._horizon_s = send_at_horizon_s(dedupe_ttl_s)

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        send_at_ms = delivery.job.send_at_ms
        now_ms = self._clock.now_ms()
        if send_at_ms is None or send_at_ms <= now_ms:
            return rest(delivery)
        wait_ms = send_at_ms - now_ms
        if wait_ms > self._horizon_s * 1000:
            return delivery.refuse(
                Outcome.INVALID_MESSAGE,
                f"sendAt is {wait_ms / 86_400_000:.1f} days ahead; this pipeline schedules at most "
                f"{self._horizon_s / 86_400:g} days ahead (its dedupe_ttl, at most "
                f"{MAX_SEND_AT_AHEAD_S // 86_400} days): schedule nearer, or raise dedupe_ttl")
        return Redeliver(delivery.result(Outcome.SCHEDULED, "waiting for its sendAt"),
                         retry_after_s=-(-wait_ms // 1000), due_at_ms=send_at_ms)


class Expiry:
    """Never sent stale: a job met after its ``expiresAt`` (or, with none, after its lane's age limit counted from
    its first queueing: ``max_job_age``) is acknowledged unsent and its key recorded ``EXPIRED``, so no copy or
    redrive of it is sent while the ledger remembers the key. A key whose record stands already is settled by that
    record (sent, cancelled or expired before); a key another delivery holds in flight is left to it, and this copy
    acknowledged. Every delivery the deployment allows and whose time has come meets it before its claim, whether
    it was parked, throttled, paced or redriven."""

    def __init__(self, clock: Clock, ledger: DedupeLedger, tenant_of: Callable[[ParsedJob], str | None],
                 max_age_s: int | None = None) -> None:
        self._clock = clock
        self._ledger = ledger
        self._tenant_of = tenant_of
        self._max_age_ms = None if max_age_s is None else max_age_s * 1000

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        job = delivery.job
        now_ms = self._clock.now_ms()
        expires_at_ms, what = job.expires_at_ms, f"its {EXPIRES_AT_FIELD}"
        # Only a lane with an age limit reads the record's attributes for it: every record meets this check.
        queued_at_ms = delivery.record.first_queued_at if expires_at_ms is None and self._max_age_ms else None
        if queued_at_ms is not None and self._max_age_ms is not None:
            expires_at_ms = queued_at_ms + self._max_age_ms
            what = f"its lane's age limit (max_job_age, {self._max_age_ms // 1000:,} s from its first queueing)"
        if expires_at_ms is None or now_ms <= expires_at_ms:
            return rest(delivery.expiring_at(expires_at_ms))
        late = f"met {(now_ms - expires_at_ms) / 1000:,.0f} s after {what}"
        try:
            for _ in range(2):  # a record that vanished between the write and its reading: once more
                written = self._ledger.record_expired(job.dedupe_key, job.payload_hash, self._tenant_of(job))
                if written.won:
                    return delivery.result(Outcome.EXPIRED, f"{late}: not sent, its key recorded EXPIRED")
                if written.existing is not None:
                    settled = settled_result(delivery.record.message_id, job, written.existing)
                    return settled or delivery.result(Outcome.EXPIRED, f"{late}: not sent; another delivery of "
                                                      "it holds the key, whose record decides")
        except LEDGER_ERRORS as error:
            return Redeliver(delivery.result(ledger_outcome(error), describe(error)))
        return Redeliver(delivery.result(Outcome.CONTENDED, "the key's record kept changing under this worker"))


class CarriedSend:
    """A copy carrying a send SES accepted for an earlier delivery writes its SENT record first, so no copy of
    the job takes the key for a dead worker's and sends it again."""

    def __init__(self, ledger: DedupeLedger) -> None:
        self.ledger = ledger

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        unrecorded = delivery.record.unrecorded_send
        if unrecorded is not None:
            owner, ses_message_id = unrecorded
            try:
                completion = self.ledger.mark_sent(delivery.job.dedupe_key, owner, ses_message_id)
            except LEDGER_ERRORS as error:
                return Redeliver(delivery.result(ledger_outcome(error), describe(error)), unrecorded_send=unrecorded)
            if completion.double_send:  # another email's SES event came first: reported by this record's line
                return amended(rest(delivery), double_send=True)
        return rest(delivery)
