"""Taking an email back before it is sent: a tombstone on the key that every later claim respects.

The tombstone is one conditional PutItem on the key's ledger item under the claim's own condition (no live record),
so exactly one of a cancel and a claim wins. If the cancel wins, no worker claims the key while the tombstone lasts:
each delivery of the job is acknowledged and nothing is sent. The tombstone lasts
:data:`~sendonce_contract.job_lifetime.CANCELLED_KEY_LIFETIME_S` (88 days), longer than any pipeline's job can
still arrive after it is enqueued, whatever its ``dedupe_ttl`` and its ``sendAt``: no caller passes a lifetime.
If a worker claimed it first, nothing is written and the caller learns the state that was in the way, in the same
write. The producer's ``cancel`` and the operator's
``sendonce cancel`` both send this request; only the I/O is theirs.
"""

# No `from __future__ import annotations`: NamedTuple field types stay objects, which the API reference resolves.
from typing import Any, NamedTuple

from .job_lifetime import CANCELLED_KEY_LIFETIME_S
from .record import EmailRecord
from .schema import Ledger, Status

# What a cancel promises in time, for the deprecation notes of the lifetime arguments it no longer takes.
CANCEL_LASTS = (f"a cancel stands {CANCELLED_KEY_LIFETIME_S // 86_400} days, longer than any copy of its job can "
                "still arrive, whatever the pipeline's dedupe_ttl")

_TOO_LATE = {
    Status.SENT.value: "it was already sent",
    Status.IN_FLIGHT.value: "a worker has claimed it and may be sending it now",
    Status.UNKNOWN.value: "a worker died while sending it; whether it went out is unknown",
}


class Cancellation(NamedTuple):
    """``cancelled``: no email will go out for the key (the tombstone outlives every copy of its job). Otherwise
    ``record`` is the state that was in the way: a worker claimed it (IN_FLIGHT), sent it (SENT) or cannot tell
    (UNKNOWN)."""

    cancelled: bool
    record: EmailRecord

    @property
    def explanation(self) -> str:
        if self.cancelled:
            return "cancelled; no email will be sent for it"
        return f"too late to cancel: {_TOO_LATE.get(self.record.status, self.record.status)}"


def tombstone_request(table_name: str, key: str, now_ms: int) -> dict[str, Any]:
    """The PutItem parameters: a CANCELLED item that lives ``CANCELLED_KEY_LIFETIME_S``, longer than a copy of the
    job may still arrive, written only where the key is absent or past its TTL (DynamoDB deletes expired items
    late)."""
    return {
        "Item": {Ledger.KEY: {"S": key}, Ledger.STATUS: {"S": Status.CANCELLED.value},
                 Ledger.CANCELLED_AT: {"N": str(now_ms)},
                 Ledger.EXPIRES_AT: {"N": str(now_ms // 1000 + CANCELLED_KEY_LIFETIME_S)}},
        "TableName": table_name,
        "ConditionExpression": f"attribute_not_exists({Ledger.KEY}) OR {Ledger.EXPIRES_AT} < :now_s",
        "ExpressionAttributeValues": {":now_s": {"N": str(now_ms // 1000)}},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }


def written(request: dict[str, Any]) -> Cancellation:
    """The request went through: the key is cancelled."""
    return Cancellation(True, EmailRecord.from_item(request["Item"]))


def refused(existing_item: dict[str, Any]) -> Cancellation:
    """The condition failed on ``existing_item`` (ALL_OLD): cancelled already, or too late."""
    record = EmailRecord.from_item(existing_item)
    return Cancellation(record.status == Status.CANCELLED.value, record)
