"""A key whose record is settled (sent, its send unknown, or cancelled): the result every later delivery of it gets,
decided from the record alone. The claim decides it when its write finds the record; a paced record whose send
slot is far off decides it before waiting for one, from one read of the ledger (``send_rate``): a duplicate then
neither holds its instance for the slot nor goes back as a delayed copy to find the key sent later.
"""

from __future__ import annotations

import logging

from sendonce_contract.message import ParsedJob
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import Status

from .aws_errors import LEDGER_ERRORS, describe
from .checks import Delivery
from .ledger import DedupeLedger
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
    if state in (Status.SENT, Status.UNKNOWN):
        return RecordResult(message_id, Outcome.DUPLICATE, job.dedupe_key, ses_message_id=existing.ses_message_id,
                            attempt=existing.attempts, reason=f"already {existing.status}",
                            key_conflict=key_conflict(job, existing))
    return None


class SettledKeys:
    """The ledger read before a long wait for a send slot (one try, the ledger call's timeouts)."""

    def __init__(self, ledger: DedupeLedger, call_ms: int) -> None:
        self._ledger = ledger
        self.call_ms = call_ms  # how long a read may last: the client's connect and read timeouts

    def result(self, delivery: Delivery) -> RecordResult | None:
        """The delivery's result if its key is settled already; None if not, or if the ledger did not answer (the
        record then waits for its slot as it would have, and the claim decides)."""
        try:
            existing = self._ledger.read(delivery.job.dedupe_key)
        except LEDGER_ERRORS as error:
            LOGGER.info("could not read %s before waiting for a send slot: %s", delivery.job.dedupe_key,
                        describe(error))
            return None
        return None if existing is None else settled_result(delivery.record.message_id, delivery.job, existing)
