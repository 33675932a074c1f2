"""The protocol for one record: parse, guard the deadline, claim, send, record. See the docs' guarantees page."""

from __future__ import annotations

import logging
import math
import uuid
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.fifo import SEND_AT_ON_FIFO
from sendonce_contract.message import ContractTooNew, InvalidMessage, ParsedJob, parse_job
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import Status

from .aws_errors import ledger_trouble
from .clock import Clock, Deadline
from .dead_letter import DeadLetterQueue
from .ledger import Claim, DedupeLedger
from .outcome import DEAD_LETTER_REASONS, Outcome, RecordResult
from .ses_sender import Accepted, Refused, SesSender
from .settings import LEDGER_CALLS_PER_RECORD, Settings
from .sqs_record import SqsRecord

if TYPE_CHECKING:  # built only where deployed with them (the handler imports them then)
    from .key_privacy import PrivateKeys
    from .send_rate import SendRateLimiter

LOGGER = logging.getLogger("sendonce")
# A lost race re-reads the state through the next conditional write; more rounds than this means churn.
CLAIM_ROUNDS = 3
COMPLETION_TRIES = 3
CLAIM_TRIES = 2
LEDGER_ERRORS = (ClientError, BotoCoreError)
# Outcomes in which a send was made (or may have been): the send slot they took is spent.
_SENT_OR_TRIED = frozenset({Outcome.SENT, Outcome.SENT_UNRECORDED, Outcome.REFUSED, Outcome.THROTTLED,
                            Outcome.QUOTA_EXHAUSTED, Outcome.AMBIGUOUS})


class RecordProcessor:
    def __init__(
        self,
        settings: Settings,
        ledger: DedupeLedger,
        sender: SesSender,
        dead_letters: DeadLetterQueue,
        clock: Clock,
        send_rate: SendRateLimiter | None = None,
        private_keys: PrivateKeys | None = None,
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        self._sender = sender
        self._dead_letters = dead_letters
        self._clock = clock
        self._send_rate = send_rate
        self._private_keys = private_keys

    def process(self, record: SqsRecord, deadline: Deadline) -> RecordResult:
        """Never raises for one record's sake: anything unexpected is a redelivery, not a lost batch."""
        try:
            return self._process(record, deadline)
        except LEDGER_ERRORS as error:
            return _ledger_result(RecordResult(record.message_id, Outcome.LEDGER_FAILED), error)
        except Exception as error:
            LOGGER.exception("unexpected error on message %s", record.message_id)
            return RecordResult(record.message_id, Outcome.INTERNAL_ERROR, reason=_describe(error))

    def _process(self, record: SqsRecord, deadline: Deadline) -> RecordResult:
        if deadline.remaining_ms() < self._settings.budget.record_budget_ms:
            return RecordResult(record.message_id, Outcome.DEADLINE, reason="too little time left to send")
        try:
            job = parse_job(record.body, record.message_id)
        except InvalidMessage as error:
            key, reason = error.dedupe_key, error.reason
            if self._private_keys is not None:
                key, reason = self._private_keys.invalid(record.body, error)
            return self._dead_letter(record, Outcome.INVALID_MESSAGE, reason, key)
        except ContractTooNew as error:
            too_new_key = error.dedupe_key
            if self._private_keys is not None and too_new_key is not None:
                too_new_key = self._private_keys.digest(too_new_key)
            return RecordResult(record.message_id, Outcome.CONTRACT_TOO_NEW, too_new_key, reason=str(error))
        if self._private_keys is not None:
            job = self._private_keys.job(job)  # from here on the key is its digest, everywhere
        allowed = self._settings.allowed_recipients
        refused = allowed.refused((("to", job.to), ("cc", job.cc), ("bcc", job.bcc))) if allowed else []
        if refused:
            return self._dead_letter(
                record, Outcome.RECIPIENT_NOT_ALLOWED,
                f"{', '.join(refused)} not in the pipeline's allowed_recipients: this stage sends to those only; "
                "nothing was sent", job.dedupe_key)
        if self._settings.ses_events and job.configuration_set not in (
            None, self._settings.configuration_set
        ):
            return self._dead_letter(
                record, Outcome.INVALID_MESSAGE,
                f"configurationSet {job.configuration_set!r} is refused: SES's events through the pipeline's own "
                "set are the evidence each email was sent once; drop the field (or deploy with ses_events=False)",
                job.dedupe_key,
            )
        if job.send_at_ms is not None and self._settings.fifo:
            return self._dead_letter(record, Outcome.INVALID_MESSAGE, SEND_AT_ON_FIFO,
                                     job.dedupe_key)
        if job.send_at_ms is not None and job.send_at_ms > self._clock.now_ms():
            return self._schedule(record, job, job.send_at_ms - self._clock.now_ms())
        policy = job.delivery or self._settings.delivery
        if record.unrecorded_send is not None:
            unrecorded = self._record_carried_send(record, job, record.unrecorded_send)
            if unrecorded is not None:
                return unrecorded
        # The send slot is taken before the claim, so nothing waits between claiming a key and sending it: a
        # worker killed while waiting leaves no claim behind, and the key is not lost to the crash window.
        # SES counts recipients, not emails: a send takes one token per recipient.
        recipients = len(job.to) + len(job.cc) + len(job.bcc)
        if self._send_rate is not None:
            spare_s = (deadline.remaining_ms() - self._settings.budget.record_budget_ms) / 1000
            if not self._send_rate.acquire(max_wait_s=max(0.0, spare_s), tokens=recipients):
                return RecordResult(record.message_id, Outcome.PACED, job.dedupe_key,
                                    reason="the send rate leaves no send slot in this invocation",
                                    retry_after_s=math.ceil(self._send_rate.defer(recipients)))
        try:
            result = self._claim_and_settle(record, job, policy, deadline)
        except BaseException:
            if self._send_rate is not None:
                self._send_rate.refund(recipients)
            raise
        if self._send_rate is not None and result.outcome not in _SENT_OR_TRIED:
            self._send_rate.refund(recipients)
        return result

    def _schedule(self, record: SqsRecord, job: ParsedJob, wait_ms: int) -> RecordResult:
        """Not claimed before its time: the job waits as delayed copies, so the key stays free to cancel."""
        if wait_ms > self._settings.dedupe_ttl_s * 1000:
            return self._dead_letter(
                record, Outcome.INVALID_MESSAGE,
                f"sendAt is {wait_ms / 86_400_000:.1f} days ahead; this pipeline remembers a key (and a cancel) "
                f"for dedupe_ttl ({self._settings.dedupe_ttl_s / 86_400:g} days): schedule at most that far ahead, "
                "or raise dedupe_ttl", job.dedupe_key)
        return RecordResult(record.message_id, Outcome.SCHEDULED, job.dedupe_key, reason="waiting for its sendAt",
                            retry_after_s=-(-wait_ms // 1000))
    def _record_carried_send(
        self, record: SqsRecord, job: ParsedJob, unrecorded: tuple[str, str]
    ) -> RecordResult | None:
        """Write the SENT record an earlier delivery could not (SES accepted it); None once written (or moot)."""
        owner, ses_message_id = unrecorded
        try:
            self._ledger.mark_sent(job.dedupe_key, owner, ses_message_id)
        except LEDGER_ERRORS as error:
            result = RecordResult(record.message_id, Outcome.LEDGER_FAILED, job.dedupe_key,
                                  unrecorded_send=unrecorded)
            return _ledger_result(result, error)
        return None

    def _claim_and_settle(
        self, record: SqsRecord, job: ParsedJob, policy: DeliveryPolicy, deadline: Deadline
    ) -> RecordResult:
        owner = uuid.uuid4().hex
        try:
            for _ in range(CLAIM_ROUNDS):
                claim = self._claim(job, owner, deadline)
                if claim.won:
                    return self._send(record, job, owner, claim.attempts, deadline)
                if claim.existing is None:
                    continue
                if claim.existing.owner in record.unsent_claims and claim.existing.state is Status.IN_FLIGHT:
                    # Our own lineage's claim, written by a delivery that surely never sent: not a dead worker's.
                    step = self._ledger.take_over(claim.existing, owner, self._lease_until(deadline),
                                                  job.payload_hash, unsent=True)
                    if step.won:
                        return self._send(record, job, owner, step.attempts, deadline)
                    continue
                result = self._settle_existing(record, job, policy, owner, claim.existing, deadline)
                if result is not None:
                    return result
        except LEDGER_ERRORS as error:
            # Before any send: our claim may have been written (its answer lost) but nothing went out under it.
            # Take it back if DynamoDB lets us (a late answer is usually a write carried out), so no other copy
            # of the job takes it for a dead worker's; and tell our own copy which claim it may take over.
            self._abandon(job.dedupe_key, owner, deadline)
            # A token carried in and not yet taken over still names a claim nobody sent under: pass both on.
            unsent = " ".join([*record.unsent_claims[-1:], owner])
            result = RecordResult(record.message_id, Outcome.LEDGER_FAILED, job.dedupe_key, unsent_claim=unsent)
            return _ledger_result(result, error)
        return RecordResult(record.message_id, Outcome.CONTENDED, job.dedupe_key,
                            reason="the key's record kept changing under this worker")

    def _claim(self, job: ParsedJob, owner: str, deadline: Deadline) -> Claim:
        """Claim, trying again after a ledger error while a whole record still fits before the deadline: a claim
        whose answer was lost is ours on the next try (the condition accepts our own owner token)."""
        tries = 1
        while True:
            try:
                return self._ledger.claim(job.dedupe_key, owner, self._lease_until(deadline), job.payload_hash)
            except LEDGER_ERRORS as error:
                if tries >= CLAIM_TRIES or deadline.remaining_ms() < self._settings.budget.record_budget_ms:
                    raise
                tries += 1
                LOGGER.warning("claim of %s failed, trying again: %s", job.dedupe_key, _describe(error))

    def _lease_until(self, deadline: Deadline) -> int:
        """A lease outlives the invocation by a margin, so it expires only once its worker is surely dead."""
        return self._clock.now_ms() + deadline.remaining_ms() + self._settings.budget.lease_margin_ms

    def _settle_existing(
        self,
        record: SqsRecord,
        job: ParsedJob,
        policy: DeliveryPolicy,
        owner: str,
        existing: EmailRecord,
        deadline: Deadline,
    ) -> RecordResult | None:
        """Decide on a key someone else holds; None means the state moved on, so claim again."""
        state = existing.state
        if state is Status.CANCELLED:
            return RecordResult(record.message_id, Outcome.CANCELLED, job.dedupe_key,
                                reason="the application cancelled this email before it was sent")
        conflict = existing.payload_hash != job.payload_hash
        if conflict:
            LOGGER.warning("key %s seen again with a different payload; not sending it twice", job.dedupe_key)
        if state in (Status.SENT, Status.UNKNOWN):
            return RecordResult(record.message_id, Outcome.DUPLICATE, job.dedupe_key,
                                ses_message_id=existing.ses_message_id, attempt=existing.attempts,
                                reason=f"already {existing.status}", key_conflict=conflict)
        lease_expires_at_ms = existing.lease_expires_at_ms or 0  # a claim always writes one
        lease_left_ms = lease_expires_at_ms - self._clock.now_ms()
        if lease_left_ms > 0:
            return RecordResult(record.message_id, Outcome.IN_FLIGHT_ELSEWHERE, job.dedupe_key,
                                attempt=existing.attempts, reason="another worker holds a live lease",
                                key_conflict=conflict, retry_after_s=-(-lease_left_ms // 1000))
        # IN_FLIGHT with an expired lease: its worker died, and whether SES accepted its send is unknown. SES's
        # events would have marked it SENT; until the grace period ends, they may still come.
        if self._settings.ses_events:
            wait_ms = lease_expires_at_ms + self._settings.evidence_grace_ms - self._clock.now_ms()
            if wait_ms > 0:
                return RecordResult(record.message_id, Outcome.AWAITING_EVIDENCE, job.dedupe_key,
                                    attempt=existing.attempts, key_conflict=conflict,
                                    reason="a worker died mid-send; waiting for SES's events before deciding",
                                    retry_after_s=-(-wait_ms // 1000))
        step: Claim
        if policy is DeliveryPolicy.NEVER_RESEND:
            step = self._ledger.mark_unknown(existing)
            if step.won:
                return RecordResult(record.message_id, Outcome.MARKED_UNKNOWN, job.dedupe_key,
                                    attempt=existing.attempts,
                                    reason="a worker died mid-send and SES showed no sign of it; never-resend "
                                    "does not send again", key_conflict=conflict)
            return None
        step = self._ledger.take_over(existing, owner, self._lease_until(deadline), job.payload_hash)
        if step.won:
            return self._send(record, job, owner, step.attempts, deadline)
        return None

    def _send(self, record: SqsRecord, job: ParsedJob, owner: str, attempt: int, deadline: Deadline) -> RecordResult:
        key = job.dedupe_key
        outcome = self._sender.send(job)
        if isinstance(outcome, Accepted):
            recorded = self._complete(key, owner, outcome.ses_message_id, deadline)
            if recorded:
                return RecordResult(record.message_id, Outcome.SENT, key, ses_message_id=outcome.ses_message_id,
                                    attempt=attempt)
            return RecordResult(record.message_id, Outcome.SENT_UNRECORDED, key, ses_message_id=outcome.ses_message_id,
                                attempt=attempt, reason="SES accepted; the SENT record could not be written yet",
                                unrecorded_send=(owner, outcome.ses_message_id))
        if isinstance(outcome, Refused):
            unsent = self._release(key, owner, attempt)
            if outcome.retryable:
                kind = Outcome.QUOTA_EXHAUSTED if outcome.quota else Outcome.THROTTLED
                return RecordResult(record.message_id, kind, key, attempt=attempt, reason=outcome.reason,
                                    unsent_claim=unsent)
            return self._dead_letter(record, Outcome.REFUSED, outcome.reason, key, attempt)
        # Ambiguous: the record stays IN_FLIGHT; when its lease expires, the delivery policy decides.
        return RecordResult(record.message_id, Outcome.AMBIGUOUS, key, attempt=attempt, reason=outcome.reason)

    def _abandon(self, key: str, owner: str, deadline: Deadline) -> None:
        """Best effort: delete a first claim of ours that may have been written (never a takeover's record)."""
        if deadline.remaining_ms() < self._settings.budget.ledger_budget_ms // LEDGER_CALLS_PER_RECORD:
            return
        try:
            self._ledger.release(key, owner)
        except LEDGER_ERRORS as error:
            LOGGER.warning("could not take back the claim of %s: %s", key, _describe(error))

    def _release(self, key: str, owner: str, attempt: int) -> str | None:
        """Release our claim after SES refused; if DynamoDB did not answer, the claim's token, which a copy of the
        job may take over (nothing was sent under it)."""
        try:
            self._ledger.release(key, owner, attempt)
        except LEDGER_ERRORS as error:
            LOGGER.warning("could not release %s after SES refused: %s", key, _describe(error))
            return owner
        return None

    def _complete(self, key: str, owner: str, ses_message_id: str, deadline: Deadline) -> bool:
        for _ in range(COMPLETION_TRIES):
            try:
                return self._ledger.mark_sent(key, owner, ses_message_id)
            except LEDGER_ERRORS as error:
                LOGGER.warning("could not record %s as SENT: %s", key, _describe(error))
                if deadline.remaining_ms() < self._settings.budget.ledger_budget_ms:
                    break
        return False

    def _dead_letter(
        self,
        record: SqsRecord,
        outcome: Outcome,
        reason: str,
        key: str | None,
        attempt: int | None = None,
    ) -> RecordResult:
        reason_code = DEAD_LETTER_REASONS[outcome]
        if self._dead_letters.send(record, reason_code, reason, key):
            return RecordResult(record.message_id, outcome, key, attempt=attempt, reason=reason,
                                dead_letter_reason=reason_code.value)
        return RecordResult(record.message_id, Outcome.DEAD_LETTER_FAILED, key, attempt=attempt,
                            reason=f"could not move to the DLQ ({reason})")


def _ledger_result(result: RecordResult, error: BaseException) -> RecordResult:
    """``result`` as DynamoDB's trouble makes it: a wait (throttled or unavailable) or a real failure."""
    return result._replace(outcome=ledger_trouble(error) or Outcome.LEDGER_FAILED, reason=_describe(error))


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
