"""The dedupe ledger: one DynamoDB item per dedupe key, whose conditional writes are the lock.

Item attributes: ``dedupeKey`` (partition key), ``status`` (IN_FLIGHT, SENT, UNKNOWN), ``owner`` (a token
unique to one attempt), ``leaseExpiresAt`` (epoch ms), ``expiresAt`` (epoch s, the TTL attribute),
``payloadHash``, ``sesMessageId``, ``claimedAt`` and ``sentAt`` (epoch ms), ``attempts``.

Every write that follows a claim is conditional on ``owner``, so a late worker can never overwrite a newer
claim. An item whose ``expiresAt`` has passed counts as absent: DynamoDB's TTL deletion lags, so the reader checks.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from .clock import Clock

CONDITION_FAILED = "ConditionalCheckFailedException"


class Status(enum.Enum):
    IN_FLIGHT = "IN_FLIGHT"
    SENT = "SENT"
    UNKNOWN = "UNKNOWN"


class LedgerRecord(NamedTuple):
    dedupe_key: str
    status: Status
    owner: str
    lease_expires_at_ms: int
    payload_hash: str
    attempts: int
    ses_message_id: str | None = None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> LedgerRecord:
        return cls(
            dedupe_key=item["dedupeKey"]["S"],
            status=Status(item["status"]["S"]),
            owner=item.get("owner", {}).get("S", ""),
            lease_expires_at_ms=int(item.get("leaseExpiresAt", {}).get("N", "0")),
            payload_hash=item.get("payloadHash", {}).get("S", ""),
            attempts=int(item.get("attempts", {}).get("N", "0")),
            ses_message_id=item.get("sesMessageId", {}).get("S"),
        )


class Claim(NamedTuple):
    """The result of a claim: ``won``, or the record that stood in the way (learned in the same write)."""

    won: bool
    attempts: int = 1
    existing: LedgerRecord | None = None


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


class DedupeLedger:
    def __init__(self, client: Any, table_name: str, ttl_s: int, clock: Clock) -> None:
        self._client = client
        self._table = table_name
        self._ttl_s = ttl_s
        self._clock = clock

    def claim(self, key: str, owner: str, lease_expires_at_ms: int, payload_hash: str) -> Claim:
        """Claim ``key`` if it is absent, expired, or already ours (an SDK retry of a claim that had won)."""
        now_ms = self._clock.now_ms()
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "dedupeKey": _s(key),
                    "status": _s(Status.IN_FLIGHT.value),
                    "owner": _s(owner),
                    "leaseExpiresAt": _n(lease_expires_at_ms),
                    "expiresAt": _n(now_ms // 1000 + self._ttl_s),
                    "payloadHash": _s(payload_hash),
                    "claimedAt": _n(now_ms),
                    "attempts": _n(1),
                },
                ConditionExpression="attribute_not_exists(dedupeKey) OR expiresAt < :now_s OR #owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":now_s": _n(now_ms // 1000), ":owner": _s(owner)},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return Claim(won=True)
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def take_over(self, previous: LedgerRecord, owner: str, lease_expires_at_ms: int, payload_hash: str) -> Claim:
        """Take an IN_FLIGHT record whose lease expired (its worker died) for a new attempt."""
        now_ms = self._clock.now_ms()
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={"dedupeKey": _s(previous.dedupe_key)},
                UpdateExpression=(
                    "SET #owner = :owner, leaseExpiresAt = :lease, claimedAt = :now_ms, payloadHash = :hash "
                    "ADD attempts :one"
                ),
                ConditionExpression="#owner = :previous AND #status = :in_flight AND leaseExpiresAt < :now_ms",
                ExpressionAttributeNames={"#owner": "owner", "#status": "status"},
                ExpressionAttributeValues={
                    ":owner": _s(owner),
                    ":lease": _n(lease_expires_at_ms),
                    ":now_ms": _n(now_ms),
                    ":hash": _s(payload_hash),
                    ":one": _n(1),
                    ":previous": _s(previous.owner),
                    ":in_flight": _s(Status.IN_FLIGHT.value),
                },
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return Claim(won=True, attempts=int(response["Attributes"]["attempts"]["N"]))
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def mark_unknown(self, previous: LedgerRecord) -> Claim:
        """Record that ``previous``'s worker died after its send may have left: nobody sends this key again."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"dedupeKey": _s(previous.dedupe_key)},
                UpdateExpression="SET #status = :unknown, unknownAt = :now_ms",
                ConditionExpression="#owner = :previous AND #status = :in_flight",
                ExpressionAttributeNames={"#owner": "owner", "#status": "status"},
                ExpressionAttributeValues={
                    ":unknown": _s(Status.UNKNOWN.value),
                    ":now_ms": _n(self._clock.now_ms()),
                    ":previous": _s(previous.owner),
                    ":in_flight": _s(Status.IN_FLIGHT.value),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return Claim(won=True, attempts=previous.attempts)
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def mark_sent(self, key: str, owner: str, ses_message_id: str) -> bool:
        """Record the accepted send; False when ``owner`` no longer holds the claim (an operator or a takeover)."""
        now_ms = self._clock.now_ms()
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"dedupeKey": _s(key)},
                UpdateExpression=(
                    "SET #status = :sent, sesMessageId = :message_id, sentAt = :now_ms, expiresAt = :expires "
                    "REMOVE leaseExpiresAt"
                ),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner", "#status": "status"},
                ExpressionAttributeValues={
                    ":sent": _s(Status.SENT.value),
                    ":message_id": _s(ses_message_id),
                    ":now_ms": _n(now_ms),
                    ":expires": _n(now_ms // 1000 + self._ttl_s),
                    ":owner": _s(owner),
                },
            )
            return True
        except ClientError as error:
            if _code(error) == CONDITION_FAILED:
                return False
            raise

    def release(self, key: str, owner: str) -> None:
        """Forget our claim after a definite refusal, so the next delivery may send; never someone else's."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={"dedupeKey": _s(key)},
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":owner": _s(owner)},
            )
        except ClientError as error:
            if _code(error) != CONDITION_FAILED:
                raise

    def _old_record(self, error: ClientError) -> LedgerRecord | None:
        """The item that failed the condition, or None if it vanished in between (the caller tries again)."""
        if _code(error) != CONDITION_FAILED:
            raise error
        item: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
        return LedgerRecord.from_item(item) if item else None


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))
