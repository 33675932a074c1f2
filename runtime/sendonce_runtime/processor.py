"""The protocol for one record: guard the deadline, parse, run the checks, claim, send, record. See the docs'
guarantees page. The checks before the claim are steps (:mod:`.checks`) the handler lists; this module is the claim."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.message import ParsedJob
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import Status

from .aws_errors import LEDGER_ERRORS, describe, ledger_outcome
from .checks import Check, Delivery, ParseJob, chain
from .clock import Clock, Deadline
from .dead_letter import DeadLetterQueue
from .ledger import NOT_RECORDED, Claim, Completion, DedupeLedger
from .outcome import Decided, Outcome, RecordResult, Redeliver, Refusal, UnrecordedSend, Verdict, amended
from .ses_sender import Accepted, Refused, SendOutcome, SesSender
from .settings import LEDGER_CALLS_PER_RECORD, Settings
from .settled_key import key_conflict, settled_result
from .sqs_record import SqsRecord, carried_claims

if TYPE_CHECKING:
    from .lane_share import UrgentThrottleRetry
    from .ses_stops import LaneStop, SesStops

LOGGER = logging.getLogger("sendonce")
# A lost race re-reads the state through the next conditional write; more rounds than this means churn.
CLAIM_ROUNDS = 3
COMPLETION_TRIES = 3
CLAIM_TRIES = 2


class RecordProcessor:
    def __init__(
        self,
        settings: Settings,
        ledger: DedupeLedger,
        sender: SesSender,
        dead_letters: DeadLetterQueue,
        clock: Clock,
        parse: ParseJob | None = None,
        checks: Sequence[Check] = (),
        throttle_retry: UrgentThrottleRetry | None = None,
        stops: SesStops | None = None,
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        self._sender = sender
        self._dead_letters = dead_letters
        self._clock = clock
        self.parse = parse or ParseJob()
        self.checks = tuple(checks)
        self._throttle_retry = throttle_retry  # the urgent lane's: a throttled send is tried again in the invocation
        self._stops = stops  # told what SES said of each send: a stop learned, or sending again
        self._run_checks = chain(self.checks, self._claim_and_send)

    def process(self, record: SqsRecord, deadline: Deadline) -> Decided:
        """Never raises for one record's sake: anything unexpected is a redelivery, not a lost batch."""
        try:
            return self._dead_letter(record, self._process(record, deadline))
        except LEDGER_ERRORS as error:
            return Redeliver(RecordResult(record.message_id, ledger_outcome(error), reason=describe(error)))
        except Exception as error:
            LOGGER.exception("unexpected error on message %s", record.message_id)
            return Redeliver(RecordResult(record.message_id, Outcome.INTERNAL_ERROR, reason=describe(error)))

    def _process(self, record: SqsRecord, deadline: Deadline) -> Verdict:
        if deadline.remaining_ms() < self._settings.budget.record_budget_ms:
            # Nothing stands in its way but this invocation's time: it comes back at once, not after its visibility.
            return Redeliver(RecordResult(record.message_id, Outcome.DEADLINE, reason="too little time left to send"),
                             retry_after_s=0)
        job = self.parse(record)
        if not isinstance(job, ParsedJob):
            return job
        tenant = self.parse.tenant(job)
        if tenant != job.tenant and record.message_group_id == job.tenant and not self._settings.fifo:
            # key_privacy, yet the producer put the name itself in the queue's metadata: say so (never the name).
            LOGGER.warning("message %s carries its tenant's name as its MessageGroupId: give its producer or relay "
                           "the pipeline's key secret (key_secret_arn), so the group id is the tenant's digest",
                           record.message_id)
        verdict = self._run_checks(Delivery(record, job, deadline))
        return verdict if tenant is None else amended(verdict, tenant=tenant)

    def _claim_and_send(self, delivery: Delivery) -> Verdict:
        """The last step: claim the key, send, record; a refusal from SES is in the DLQ when this returns (so a
        send slot is given back when it could not be moved there, as for any record not sent)."""
        record, job = delivery.record, delivery.job
        return self._dead_letter(record, self._claim_and_settle(record, job, job.delivery or self._settings.delivery,
                                                                delivery.deadline))

    def _claim_and_settle(
        self, record: SqsRecord, job: ParsedJob, policy: DeliveryPolicy, deadline: Deadline
    ) -> Verdict:
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
                        return self._send(record, job, owner, step.attempts, deadline, claim.existing.refused_sends)
                    continue
                result = self._settle_existing(record, job, policy, owner, claim.existing, deadline)
                if result is not None:
                    return result
        except LEDGER_ERRORS as error:
            # Before any send: our claim may have been written (its answer lost) but nothing went out under it.
            # Take it back if DynamoDB lets us (a late answer is usually a write carried out), so no other copy
            # of the job takes it for a dead worker's; and tell our own copy which claim it may take over.
            self._abandon(job.dedupe_key, owner, deadline)
            # Tokens carried in and not yet taken over still name claims nobody sent under: pass them on with ours.
            unsent = carried_claims([*record.unsent_claims, owner])
            return Redeliver(RecordResult(record.message_id, ledger_outcome(error), job.dedupe_key,
                                          reason=describe(error)), unsent_claim=unsent)
        return Redeliver(RecordResult(record.message_id, Outcome.CONTENDED, job.dedupe_key,
                                      reason="the key's record kept changing under this worker"))

    def _claim(self, job: ParsedJob, owner: str, deadline: Deadline) -> Claim:
        """Claim, trying again after a ledger error while a whole record still fits before the deadline: a claim
        whose answer was lost is ours on the next try (the condition accepts our own owner token)."""
        tries = 1
        while True:
            try:
                return self._ledger.claim(job.dedupe_key, owner, self._lease_until(deadline), job.payload_hash,
                                          self.parse.tenant(job))
            except LEDGER_ERRORS as error:
                if tries >= CLAIM_TRIES or deadline.remaining_ms() < self._settings.budget.record_budget_ms:
                    raise
                tries += 1
                LOGGER.warning("claim of %s failed, trying again: %s", job.dedupe_key, describe(error))

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
    ) -> Verdict | None:
        """Decide on a key someone else holds; None means the state moved on, so claim again."""
        settled = settled_result(record.message_id, job, existing)
        if settled is not None:
            return settled
        conflict = key_conflict(job, existing)
        lease_expires_at_ms = existing.lease_expires_at_ms or 0  # a claim always writes one
        lease_left_ms = lease_expires_at_ms - self._clock.now_ms()
        if lease_left_ms > 0:
            return Redeliver(RecordResult(record.message_id, Outcome.IN_FLIGHT_ELSEWHERE, job.dedupe_key,
                                          attempt=existing.attempts, reason="another worker holds a live lease",
                                          key_conflict=conflict), retry_after_s=-(-lease_left_ms // 1000))
        # IN_FLIGHT with an expired lease: its worker died, and whether SES accepted its send is unknown. SES's
        # events would have marked it SENT; until the grace period ends, they may still come.
        grace_ms = self._settings.evidence_grace_ms
        if grace_ms is not None:
            wait_ms = lease_expires_at_ms + grace_ms - self._clock.now_ms()
            if wait_ms > 0:
                return Redeliver(RecordResult(
                    record.message_id, Outcome.AWAITING_EVIDENCE, job.dedupe_key, attempt=existing.attempts,
                    possible_sends=existing.attempts - existing.refused_sends,
                    key_conflict=conflict, reason="a worker died mid-send; waiting for SES's events before deciding",
                ), retry_after_s=-(-wait_ms // 1000))
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
            return self._send(record, job, owner, step.attempts, deadline, existing.refused_sends)
        return None

    def _send(self, record: SqsRecord, job: ParsedJob, owner: str, attempt: int, deadline: Deadline,
              refused_sends: int = 0) -> Verdict:
        """``attempt``: the key's claims so far, this one included; ``refused_sends``: those SES refused for certain
        before this one (their sends never went)."""
        key = job.dedupe_key
        if self._throttle_retry is None:
            outcome = self._sender.send(job)
        else:
            outcome = self._throttle_retry.send(lambda: self._sender.send(job), deadline)
        if isinstance(outcome, Accepted):
            completion = self._complete(key, owner, outcome.ses_message_id, deadline)
            self._heard(outcome, job, deadline)
            if completion.recorded:
                return RecordResult(record.message_id, Outcome.SENT, key, ses_message_id=outcome.ses_message_id,
                                    attempt=attempt, double_send=completion.double_send)
            return UnrecordedSend(RecordResult(
                record.message_id, Outcome.SENT_UNRECORDED, key, ses_message_id=outcome.ses_message_id,
                attempt=attempt, reason="SES accepted; the SENT record could not be written yet"), owner)
        if isinstance(outcome, Refused):
            unsent = self._release(key, owner, attempt)
            stop = self._heard(outcome, job, deadline)
            if outcome.retryable:
                return Redeliver(RecordResult(record.message_id, _refused_outcome(outcome), key, attempt=attempt,
                                              reason=outcome.reason), unsent_claim=unsent, stop=stop)
            return Refusal(RecordResult(record.message_id, Outcome.REFUSED, key, attempt=attempt,
                                        reason=outcome.reason))
        # Ambiguous: the record stays IN_FLIGHT; when its lease expires, the delivery policy decides.
        return Redeliver(RecordResult(record.message_id, Outcome.AMBIGUOUS, key, attempt=attempt,
                                      reason=outcome.reason, possible_sends=attempt - refused_sends))

    def _heard(self, outcome: SendOutcome, job: ParsedJob, deadline: Deadline) -> LaneStop | None:
        """Tell the stops what SES said, once the claim is settled: their calls never widen the crash window. The
        stop a refusal taught, if any."""
        if self._stops is None:
            return None
        return self._stops.heard(outcome, job, deadline)

    def _abandon(self, key: str, owner: str, deadline: Deadline) -> None:
        """Best effort: delete a first claim of ours that may have been written (never a takeover's record)."""
        if deadline.remaining_ms() < self._settings.budget.ledger_budget_ms // LEDGER_CALLS_PER_RECORD:
            return
        try:
            self._ledger.release(key, owner)
        except LEDGER_ERRORS as error:
            LOGGER.warning("could not take back the claim of %s: %s", key, describe(error))

    def _release(self, key: str, owner: str, attempt: int) -> str | None:
        """Release our claim after SES refused; if DynamoDB did not answer, the claim's token, which a copy of the
        job may take over (nothing was sent under it)."""
        try:
            self._ledger.release(key, owner, attempt)
        except LEDGER_ERRORS as error:
            LOGGER.warning("could not release %s after SES refused: %s", key, describe(error))
            return owner
        return None

    def _complete(self, key: str, owner: str, ses_message_id: str, deadline: Deadline) -> Completion:
        for _ in range(COMPLETION_TRIES):
            try:
                return self._ledger.mark_sent(key, owner, ses_message_id)
            except LEDGER_ERRORS as error:
                LOGGER.warning("could not record %s as SENT: %s", key, describe(error))
                if deadline.remaining_ms() < self._settings.budget.ledger_budget_ms:
                    break
        return NOT_RECORDED

    def _dead_letter(self, record: SqsRecord, verdict: Verdict) -> Decided:
        """A refusal's message moved to the DLQ with its outcome's reason code; any other verdict as it is."""
        if not isinstance(verdict, Refusal):
            return verdict
        result = verdict.result
        reason_code = result.dead_letter_reason
        assert reason_code is not None, f"{result.outcome} has no dead-letter reason in the outcome table"
        if self._dead_letters.send(record, reason_code, result.reason or "", result.dedupe_key):
            return result
        return Redeliver(RecordResult(record.message_id, Outcome.DEAD_LETTER_FAILED, result.dedupe_key,
                                      attempt=result.attempt, reason=f"could not move to the DLQ ({result.reason})"))


def _refused_outcome(refused: Refused) -> Outcome:
    """A refusal a later delivery may get past: SES's daily quota or another stop of SES's (parked), or a throttle."""
    if refused.stop is None:
        return Outcome.THROTTLED
    return Outcome.QUOTA_EXHAUSTED if refused.quota else Outcome.SES_STOPPED
