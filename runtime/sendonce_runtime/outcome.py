"""What became of one record: the outcomes, the one table of everything each means, and the results that carry them.

A new outcome is a member of :class:`Outcome` and its row in :data:`MEANINGS` (every field given; a test holds
it); the metrics, the dead-letter reasons, the redelivery's waits and ``sendonce-local run``'s summary read the row.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from sendonce_contract.schema import Metric, ReasonCode

if TYPE_CHECKING:
    from .ses_stops import LaneStop


class Outcome(enum.Enum):
    SENT = "sent"
    SENT_UNRECORDED = "sent_unrecorded"
    DUPLICATE = "duplicate"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    MARKED_UNKNOWN = "marked_unknown"
    INVALID_MESSAGE = "invalid_message"
    REFUSED = "refused"
    RECEIVES_EXHAUSTED = "receives_exhausted"
    RECIPIENT_NOT_ALLOWED = "recipient_not_allowed"
    SUSPECTED_DOUBLE = "suspected_double"
    RECIPIENT_CAPPED = "recipient_capped"
    ATTACHMENT_ENCODING = "attachment_encoding"
    ATTACHMENT_TYPE_REFUSED = "attachment_type_refused"
    ATTACHMENT_TOO_LARGE = "attachment_too_large"
    ATTACHMENT_MISSING = "attachment_missing"
    ATTACHMENT_BUCKET_REFUSED = "attachment_bucket_refused"
    HEADER_REFUSED = "header_refused"
    ATTACHMENT_UNAVAILABLE = "attachment_unavailable"
    ATTACHMENT_READ_FAILED = "attachment_read_failed"
    IN_FLIGHT_ELSEWHERE = "in_flight_elsewhere"
    AWAITING_EVIDENCE = "awaiting_evidence"
    THROTTLED = "throttled"
    QUOTA_EXHAUSTED = "quota_exhausted"
    SES_STOPPED = "ses_stopped"
    SES_STOPPED_TOO_LONG = "ses_stopped_too_long"
    PACED = "paced"
    SCHEDULED = "scheduled"
    CONTRACT_TOO_NEW = "contract_too_new"
    AMBIGUOUS = "ambiguous"
    DEADLINE = "deadline"
    GROUP_BLOCKED = "group_blocked"
    LEDGER_THROTTLED = "ledger_throttled"
    LEDGER_UNAVAILABLE = "ledger_unavailable"
    LEDGER_FAILED = "ledger_failed"
    DEAD_LETTER_FAILED = "dead_letter_failed"
    CONTENDED = "contended"
    INTERNAL_ERROR = "internal_error"

    @property
    def meaning(self) -> Meaning:
        return MEANINGS[self]

    @property
    def redeliver(self) -> bool:
        """Whether SQS should deliver the message again (a failure in the batch response), unless postponed."""
        return not MEANINGS[self].acknowledged


class Wait:
    """How long a postponed job waits before its delayed copy comes back (the redelivery holds the figures)."""

    DOUBLING = "doubling"  # jittered, doubling with each postponement: a refusal to back off from
    PARKED = "parked"  # SQS's 15 minutes a copy, while SES stops the lane's sending (one copy each time)
    DEPLOY = "deploy"  # about five minutes, the time a deploy of the upgraded consumer takes
    TURN = "turn"  # its turn at the send rate (one to three seconds where the turn is not known)
    LEASE = "lease"  # a few seconds, at most until the other worker's lease ends
    SEND_AT = "send_at"  # the time left until its sendAt, at most SQS's 15 minutes a copy


class Tally:
    """What ``sendonce-local run``'s summary counts a record as; ``ORDER`` is the order it prints them in."""

    SENT = "sent"
    DUPLICATES = "duplicates"
    REFUSED_BY_SES = "refused by SES"
    DEAD_LETTERED = "dead-lettered"  # printed with a count per reason code, of every outcome with one
    MARKED_UNKNOWN = "marked UNKNOWN"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    SCHEDULED = "scheduled for later"
    HANDED_BACK = "handed back to the queue"
    ORDER = (SENT, DUPLICATES, REFUSED_BY_SES, DEAD_LETTERED, MARKED_UNKNOWN, CANCELLED, EXPIRED, SCHEDULED,
             HANDED_BACK)


class Meaning:
    """Everything one outcome means. Every field is a keyword without a default: a row that leaves one out fails
    where it is written. (Plain classes here, not NamedTuples: the Lambda imports this at every cold start.)"""

    __slots__ = ("acknowledged", "dead_letter", "grows", "metrics", "postponed", "spends_send_slot", "summary")

    def __init__(
        self,
        *,
        acknowledged: bool,  # SQS deletes the message; else it is a batch item failure and comes back
        metrics: tuple[str, ...],  # counted once each, beside Records, in the record's log line
        dead_letter: ReasonCode | None,  # moved to the DLQ with this reason code (what `sendonce dlq` groups by)
        postponed: str | None,  # a Wait: on a standard queue a delayed copy replaces it, back after this wait
        grows: bool,  # counts as a postponement: the doubling wait grows with the count a copy carries
        spends_send_slot: bool,  # a send was made, or may have been: the send slot it took is not given back
        summary: str,  # a Tally
    ) -> None:
        self.acknowledged = acknowledged
        self.metrics = metrics
        self.dead_letter = dead_letter
        self.postponed = postponed
        self.grows = grows
        self.spends_send_slot = spends_send_slot
        self.summary = summary


MEANINGS: Mapping[Outcome, Meaning] = MappingProxyType({
    # Acknowledged: SQS deletes the message.
    Outcome.SENT: Meaning(
        acknowledged=True, metrics=(Metric.EMAILS_SENT,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=True, summary=Tally.SENT),
    # SES accepted, but the ledger write failed: acknowledged, never resent; a copy carries the completion.
    Outcome.SENT_UNRECORDED: Meaning(
        acknowledged=True, metrics=(Metric.EMAILS_SENT, Metric.SENT_UNRECORDED), dead_letter=None, postponed=None,
        grows=False, spends_send_slot=True, summary=Tally.SENT),
    Outcome.DUPLICATE: Meaning(
        acknowledged=True, metrics=(Metric.DUPLICATES_SKIPPED,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.DUPLICATES),
    # The application cancelled the key before any worker claimed it: never sent.
    Outcome.CANCELLED: Meaning(
        acknowledged=True, metrics=(Metric.CANCELLED,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.CANCELLED),
    # Met after its expiresAt: never sent, its key recorded EXPIRED (or found settled already).
    Outcome.EXPIRED: Meaning(
        acknowledged=True, metrics=(Metric.EXPIRED,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.EXPIRED),
    Outcome.MARKED_UNKNOWN: Meaning(
        acknowledged=True, metrics=(Metric.UNKNOWN_RECORDS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.MARKED_UNKNOWN),
    Outcome.INVALID_MESSAGE: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.INVALID_MESSAGE,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    Outcome.REFUSED: Meaning(
        acknowledged=True, metrics=(Metric.SES_REFUSALS,), dead_letter=ReasonCode.SES_REFUSED, postponed=None,
        grows=False, spends_send_slot=True, summary=Tally.REFUSED_BY_SES),
    # Dead-lettered with its last reason, before SQS moved it with none.
    Outcome.RECEIVES_EXHAUSTED: Meaning(
        acknowledged=True, metrics=(Metric.RECEIVES_EXHAUSTED,), dead_letter=ReasonCode.MAX_RECEIVES,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # Outside allowed_recipients: dead-lettered, nothing sent.
    Outcome.RECIPIENT_NOT_ALLOWED: Meaning(
        acknowledged=True, metrics=(Metric.RECIPIENTS_NOT_ALLOWED,), dead_letter=ReasonCode.RECIPIENT_NOT_ALLOWED,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # Held by the mis-keyed-producer guard: dead-lettered unsent, for an operator to redrive (which sends it).
    Outcome.SUSPECTED_DOUBLE: Meaning(
        acknowledged=True, metrics=(Metric.SUSPECTED_DOUBLES,), dead_letter=ReasonCode.SUSPECTED_DOUBLE,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    Outcome.RECIPIENT_CAPPED: Meaning(
        acknowledged=True, metrics=(Metric.RECIPIENT_CAPPED,), dead_letter=ReasonCode.RECIPIENT_CAP,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # Attachments and headers the contract refuses, each with its own reason code: dead-lettered, nothing sent.
    Outcome.ATTACHMENT_ENCODING: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.ATTACHMENT_ENCODING,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    Outcome.ATTACHMENT_TYPE_REFUSED: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.ATTACHMENT_TYPE_REFUSED,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    Outcome.ATTACHMENT_TOO_LARGE: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.ATTACHMENT_TOO_LARGE,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # An s3 attachment whose object S3 says does not exist (its bucket's expiry came first, or it was never put).
    Outcome.ATTACHMENT_MISSING: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.ATTACHMENT_MISSING,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # An s3 attachment in a bucket other than the pipeline's attachments bucket (or the pipeline has none).
    Outcome.ATTACHMENT_BUCKET_REFUSED: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.ATTACHMENT_BUCKET_REFUSED,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # Parked while SES stopped sending for as long as the job queue keeps a message: into the DLQ, never lost.
    Outcome.SES_STOPPED_TOO_LONG: Meaning(
        acknowledged=True, metrics=(Metric.SES_STOPPED,), dead_letter=ReasonCode.SES_PAUSED, postponed=None,
        grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    Outcome.HEADER_REFUSED: Meaning(
        acknowledged=True, metrics=(Metric.POISON_MESSAGES,), dead_letter=ReasonCode.HEADER_REFUSED,
        postponed=None, grows=False, spends_send_slot=False, summary=Tally.DEAD_LETTERED),
    # Redelivered: reported as batch item failures, back after the visibility timeout (or the wait they know);
    # a postponed one is replaced by a delayed copy on a standard queue instead, so it spends no receive.
    Outcome.IN_FLIGHT_ELSEWHERE: Meaning(
        acknowledged=False, metrics=(Metric.IN_FLIGHT_RETRIES,), dead_letter=None, postponed=Wait.LEASE,
        grows=False, spends_send_slot=False, summary=Tally.HANDED_BACK),
    # A dead worker's send: back when the grace period for SES's events ends.
    Outcome.AWAITING_EVIDENCE: Meaning(
        acknowledged=False, metrics=(Metric.AWAITING_EVIDENCE,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.THROTTLED: Meaning(
        acknowledged=False, metrics=(Metric.SES_THROTTLES,), dead_letter=None, postponed=Wait.DOUBLING, grows=True,
        spends_send_slot=True, summary=Tally.HANDED_BACK),
    # SES's daily quota: the job is parked as for any stop of SES's (below), while the lane asks SES once a minute.
    Outcome.QUOTA_EXHAUSTED: Meaning(
        acknowledged=False, metrics=(Metric.SES_STOPPED, Metric.QUOTA_EXHAUSTED), dead_letter=None,
        postponed=Wait.PARKED, grows=False, spends_send_slot=False, summary=Tally.HANDED_BACK),
    # SES stopped the lane's sending (a paused account or tenant, the pipeline's setup refused): the job is parked
    # as a delayed copy, SQS's longest delay, without asking SES, while the lane asks SES once a minute.
    Outcome.SES_STOPPED: Meaning(
        acknowledged=False, metrics=(Metric.SES_STOPPED,), dead_letter=None, postponed=Wait.PARKED, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # The pipeline's send rate left no send slot in this invocation: not claimed, back shortly.
    Outcome.PACED: Meaning(
        acknowledged=False, metrics=(Metric.PACED,), dead_letter=None, postponed=Wait.TURN, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # The job's sendAt is ahead: not claimed, back as a delayed copy (at most 15 minutes).
    Outcome.SCHEDULED: Meaning(
        acknowledged=False, metrics=(Metric.SCHEDULED,), dead_letter=None, postponed=Wait.SEND_AT, grows=False,
        spends_send_slot=False, summary=Tally.SCHEDULED),
    # A job of a newer contract version: put back until the consumer is upgraded.
    Outcome.CONTRACT_TOO_NEW: Meaning(
        acknowledged=False, metrics=(Metric.CONTRACT_TOO_NEW,), dead_letter=None, postponed=Wait.DEPLOY, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # SES's answer was lost: the record stays IN_FLIGHT; when its lease expires, the delivery policy decides.
    Outcome.AMBIGUOUS: Meaning(
        acknowledged=False, metrics=(Metric.AMBIGUOUS_SENDS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=True, summary=Tally.HANDED_BACK),
    Outcome.DEADLINE: Meaning(
        acknowledged=False, metrics=(Metric.DEADLINE_DEFERRALS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.GROUP_BLOCKED: Meaning(
        acknowledged=False, metrics=(Metric.GROUP_BLOCKED,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # DynamoDB throttled, timed out, failed with a 5xx or could not be reached before the send: nothing was
    # sent, so the job waits like a throttled one (a delayed copy; no receive spent).
    Outcome.LEDGER_THROTTLED: Meaning(
        acknowledged=False, metrics=(Metric.LEDGER_THROTTLES,), dead_letter=None, postponed=Wait.DOUBLING, grows=True,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.LEDGER_UNAVAILABLE: Meaning(
        acknowledged=False, metrics=(Metric.LEDGER_ERRORS,), dead_letter=None, postponed=Wait.DOUBLING, grows=True,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # S3 throttled, timed out, failed with a 5xx or could not be reached reading an attachment, before any claim:
    # nothing was sent, so the job waits as for the ledger's trouble (a delayed copy; no receive spent).
    Outcome.ATTACHMENT_UNAVAILABLE: Meaning(
        acknowledged=False, metrics=(Metric.ATTACHMENT_READ_RETRIES,), dead_letter=None, postponed=Wait.DOUBLING,
        grows=True, spends_send_slot=False, summary=Tally.HANDED_BACK),
    # S3 refused the read for good (access denied: the consumer's grant is missing): a real failure.
    Outcome.ATTACHMENT_READ_FAILED: Meaning(
        acknowledged=False, metrics=(Metric.RECORD_ERRORS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    # DynamoDB refused for good (access, validation): a real failure.
    Outcome.LEDGER_FAILED: Meaning(
        acknowledged=False, metrics=(Metric.RECORD_ERRORS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.DEAD_LETTER_FAILED: Meaning(
        acknowledged=False, metrics=(Metric.RECORD_ERRORS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.CONTENDED: Meaning(
        acknowledged=False, metrics=(Metric.RECORD_ERRORS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
    Outcome.INTERNAL_ERROR: Meaning(
        acknowledged=False, metrics=(Metric.RECORD_ERRORS,), dead_letter=None, postponed=None, grows=False,
        spends_send_slot=False, summary=Tally.HANDED_BACK),
})

# The outcomes that put the message in the DLQ, each with the reason code it carries there.
DEAD_LETTER_REASONS: Mapping[Outcome, ReasonCode] = MappingProxyType(
    {outcome: meaning.dead_letter for outcome, meaning in MEANINGS.items() if meaning.dead_letter is not None})
# The outcome of a job the contract refuses with a reason code (each code is one outcome's).
OUTCOME_OF_REASON: Mapping[ReasonCode, Outcome] = MappingProxyType(
    {reason: outcome for outcome, reason in DEAD_LETTER_REASONS.items()})


class RecordResult(NamedTuple):
    """What became of one record: its log line, its metrics and its answer in the batch response."""

    message_id: str
    outcome: Outcome
    dedupe_key: str | None = None
    ses_message_id: str | None = None
    attempt: int | None = None
    reason: str | None = None
    key_conflict: bool = False
    postponed_s: int | None = None  # a delayed copy of the job comes back after this long; this one is done
    tenant: str | None = None  # the job's tenant as logs and events show it (its digest with key_privacy)
    double_send: bool = False  # its SENT record found another email's SES message id: the key went out twice
    # The key that first sent this job's content to its recipients in the guard's window, when the guard first
    # saw this key do it and let it through (held ones are their outcome's).
    suspected_double_of: str | None = None
    # Of the key's claims, those whose send may have gone (the rest SES refused for certain): what bounds a FIFO
    # job's waits for SES's word. None: as many as its attempts.
    possible_sends: int | None = None

    @property
    def redeliver(self) -> bool:
        """Whether SQS should deliver this message again (a failure in the batch response)."""
        return self.outcome.redeliver and self.postponed_s is None

    @property
    def dead_letter_reason(self) -> ReasonCode | None:
        """The reason code the message went to the DLQ with; None if it did not go there."""
        return self.outcome.meaning.dead_letter


# What a check or the protocol decides for a record besides a result that simply holds: the three kinds below
# carry what the processor and the redelivery still do for it.

class Refusal:
    """``result`` holds once the message is in the DLQ with its outcome's reason code (the processor moves it)."""

    __slots__ = ("result",)

    def __init__(self, result: RecordResult) -> None:
        self.result = result

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome


class Redeliver:
    """Not done: the redelivery brings the job back (a delayed copy, or the message visible again)."""

    __slots__ = ("due_at_ms", "result", "retry_after_s", "stop", "unrecorded_send", "unsent_claim")

    def __init__(
        self,
        result: RecordResult,
        retry_after_s: int | None = None,
        unsent_claim: str | None = None,
        unrecorded_send: tuple[str, str] | None = None,
        due_at_ms: int | None = None,
        stop: LaneStop | None = None,
    ) -> None:
        self.result = result
        self.stop = stop  # a parked job's: the stop it waits out (``ses_stops``), which the waiting room files it by
        self.retry_after_s = retry_after_s  # the wait this record knows (a lease, a grace period, sendAt, its turn)
        self.due_at_ms = due_at_ms  # a scheduled job's sendAt: the same for every delivery of it
        # The owner token of a claim this attempt wrote (or may have) but surely never sent under: its copy may
        # take that claim over instead of taking it for a dead worker's.
        self.unsent_claim = unsent_claim
        # (owner, SES message id) of a send SES accepted whose SENT record is still to be written.
        self.unrecorded_send = unrecorded_send

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome


class UnrecordedSend:
    """SES accepted under ``owner``'s claim, the SENT record is not written: acknowledged, and a copy carries the
    completion until DynamoDB takes it (the redelivery sends it)."""

    __slots__ = ("owner", "result")

    def __init__(self, result: RecordResult, owner: str) -> None:
        self.result = result
        self.owner = owner

    @property
    def outcome(self) -> Outcome:
        return self.result.outcome


Verdict = RecordResult | Refusal | Redeliver | UnrecordedSend


def amended(verdict: Verdict, **fields: Any) -> Verdict:
    """``verdict`` with these fields of its result replaced (the job's tenant, a double its completion found)."""
    if isinstance(verdict, RecordResult):
        return verdict._replace(**fields)
    verdict.result = verdict.result._replace(**fields)
    return verdict
# What the processor hands the redelivery: refusals are in the DLQ by then.
Decided = RecordResult | Redeliver | UnrecordedSend
