"""A key whose record is settled (sent, its send unknown, cancelled or expired): the result every later delivery of
it gets, decided from the record alone, when the claim's (or the expiry's) write finds the record.
"""

from __future__ import annotations

import logging

from sendonce_contract.message import ParsedJob
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import EXPIRES_AT_FIELD, Status

from .outcome import Outcome, RecordResult

LOGGER = logging.getLogger("sendonce")


def key_conflict(job: ParsedJob, existing: EmailRecord) -> bool:
    """Whether the key's record was claimed for another payload (said in the log: never sent twice for it)."""
    conflict = existing.payload_hash != job.payload_hash
    if conflict:
        LOGGER.warning("key %s seen again with a different payload; not sending it twice", job.dedupe_key)
    return conflict


def settled_result(message_id: str, job: ParsedJob, existing: EmailRecord) -> RecordResult | None:
    """The result of a delivery of ``job`` whose key's record is ``existing``, when that record is settled; None
    when it is still in flight (a live lease, or a dead worker's, which the claim decides)."""
    state = existing.state
    if state is Status.CANCELLED:
        return RecordResult(message_id, Outcome.CANCELLED, job.dedupe_key,
                            reason="the application cancelled this email before it was sent")
    if state is Status.EXPIRED:
        return RecordResult(message_id, Outcome.EXPIRED, job.dedupe_key,
                            reason=f"already EXPIRED: a copy of its job was met after its {EXPIRES_AT_FIELD}, and "
                                   "not sent")
    if state in (Status.SENT, Status.UNKNOWN):
        return RecordResult(message_id, Outcome.DUPLICATE, job.dedupe_key, ses_message_id=existing.ses_message_id,
                            attempt=existing.attempts, reason=f"already {existing.status}",
                            key_conflict=key_conflict(job, existing))
    return None
