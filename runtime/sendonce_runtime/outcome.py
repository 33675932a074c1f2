"""What became of one record: the outcome names and whether SQS should redeliver it."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from sendonce_contract.schema import ReasonCode


class Outcome(enum.Enum):
    # Acknowledged: SQS deletes the message.
    SENT = "sent"
    SENT_UNRECORDED = "sent_unrecorded"  # SES accepted, but the ledger write failed: acked, never resent
    DUPLICATE = "duplicate"
    CANCELLED = "cancelled"  # the application cancelled the key before any worker claimed it: never sent
    MARKED_UNKNOWN = "marked_unknown"
    INVALID_MESSAGE = "invalid_message"
    REFUSED = "refused"
    RECEIVES_EXHAUSTED = "receives_exhausted"  # dead-lettered with its last reason, before SQS moved it with none
    RECIPIENT_NOT_ALLOWED = "recipient_not_allowed"  # outside allowed_recipients: dead-lettered, nothing sent
    # Reported as batch item failures: SQS delivers them again after the visibility timeout.
    IN_FLIGHT_ELSEWHERE = "in_flight_elsewhere"
    AWAITING_EVIDENCE = "awaiting_evidence"  # a dead worker's send: back when the grace period for SES's events ends
    THROTTLED = "throttled"
    QUOTA_EXHAUSTED = "quota_exhausted"  # SES's daily quota: the job waits about ten minutes
    PACED = "paced"  # the pipeline's send rate left no send slot in this invocation: not claimed, back shortly
    SCHEDULED = "scheduled"  # the job's sendAt is ahead: not claimed, back as a delayed copy (at most 15 minutes)
    CONTRACT_TOO_NEW = "contract_too_new"  # a job of a newer contract version: put back until the consumer is upgraded
    AMBIGUOUS = "ambiguous"
    DEADLINE = "deadline"
    GROUP_BLOCKED = "group_blocked"
    # DynamoDB throttled, timed out, failed with a 5xx or could not be reached before the send: nothing was
    # sent, so the job waits like a throttled one (a delayed copy; no receive spent).
    LEDGER_THROTTLED = "ledger_throttled"
    LEDGER_UNAVAILABLE = "ledger_unavailable"
    LEDGER_FAILED = "ledger_failed"  # DynamoDB refused for good (access, validation): a real failure
    DEAD_LETTER_FAILED = "dead_letter_failed"
    CONTENDED = "contended"
    INTERNAL_ERROR = "internal_error"

    @property
    def redeliver(self) -> bool:
        return self not in _ACKNOWLEDGED


_ACKNOWLEDGED = frozenset(
    {Outcome.SENT, Outcome.SENT_UNRECORDED, Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.MARKED_UNKNOWN,
     Outcome.INVALID_MESSAGE, Outcome.REFUSED, Outcome.RECEIVES_EXHAUSTED, Outcome.RECIPIENT_NOT_ALLOWED}
)

# The outcomes that put the message in the DLQ, each with the reason code it carries there (what `sendonce dlq`
# groups by): the one table the consumer's callers and `sendonce-local run`'s summary read.
DEAD_LETTER_REASONS: Mapping[Outcome, ReasonCode] = MappingProxyType({
    Outcome.INVALID_MESSAGE: ReasonCode.INVALID_MESSAGE,
    Outcome.REFUSED: ReasonCode.SES_REFUSED,
    Outcome.RECEIVES_EXHAUSTED: ReasonCode.MAX_RECEIVES,
    Outcome.RECIPIENT_NOT_ALLOWED: ReasonCode.RECIPIENT_NOT_ALLOWED,
})


class RecordResult(NamedTuple):
    message_id: str
    outcome: Outcome
    dedupe_key: str | None = None
    ses_message_id: str | None = None
    attempt: int | None = None
    reason: str | None = None
    key_conflict: bool = False
    retry_after_s: int | None = None  # redeliver after this long, not after the whole visibility timeout
    postponed_s: int | None = None  # a delayed copy of the job comes back after this long; this one is done
    dead_letter_reason: str | None = None  # the reason code, when the message went to the DLQ
    # The owner token of a claim this attempt wrote (or may have) but surely never sent under: its copy may take
    # that claim over instead of taking it for a dead worker's.
    unsent_claim: str | None = None
    # (owner, SES message id) of a send SES accepted whose SENT record could not be written yet.
    unrecorded_send: tuple[str, str] | None = None

    @property
    def redeliver(self) -> bool:
        """Whether SQS should deliver this message again (a failure in the batch response)."""
        return self.outcome.redeliver and self.postponed_s is None
