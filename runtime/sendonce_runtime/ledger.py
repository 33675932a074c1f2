"""The dedupe ledger: one DynamoDB item per dedupe key, whose conditional writes are the lock.

The item's attributes are :class:`sendonce_contract.schema.Ledger`'s. Every write that follows a claim is
conditional on the owner token, so a late worker can never overwrite a newer claim. An item whose TTL time has
passed counts as absent: DynamoDB's TTL deletion lags, so the reader checks.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.record import EmailRecord, every_ses_message_id, second_email
from sendonce_contract.schema import Ledger, Status

from .clock import Clock
from .dynamodb_values import condition_failed, found_item, number, string

# Owner and status are DynamoDB reserved words: expressions name them through these placeholders.
NAMES = {"#owner": Ledger.OWNER, "#status": Ledger.STATUS}
KEY, EXPIRES_AT, LEASE = Ledger.KEY, Ledger.EXPIRES_AT, Ledger.LEASE_EXPIRES_AT


class Claim:
    """The result of a claim: ``won``, or the record that stood in the way (learned in the same write). (A plain
    class, not a NamedTuple: it costs a cold start less to build.)"""

    __slots__ = ("attempts", "existing", "won")

    def __init__(self, won: bool, attempts: int = 1, existing: EmailRecord | None = None) -> None:
        self.won = won
        self.attempts = attempts
        self.existing = existing


class Completion:
    """The result of recording a send: ``recorded``, unless the claim was no longer ours; ``double_send`` when the
    record already held another email's SES message id (SES's events of a dead worker's send, which came after the
    grace period but before this completion): the key went out twice, and the caller reports it."""

    __slots__ = ("double_send", "recorded")

    def __init__(self, recorded: bool, double_send: bool = False) -> None:
        self.recorded = recorded
        self.double_send = double_send


NOT_RECORDED = Completion(False)


class DedupeLedger:
    def __init__(self, client: Any, table_name: str, ttl_s: int, clock: Clock) -> None:
        self._client = client
        self._table = table_name
        self._ttl_s = ttl_s
        self._clock = clock

    def claim(self, key: str, owner: str, lease_expires_at_ms: int, payload_hash: str,
              tenant: str | None = None) -> Claim:
        """Claim ``key`` if it is absent, expired, or already ours (an SDK retry of a claim that had won).
        ``tenant`` (as the logs show it) is kept on the record, so its outcome events name it."""
        now_ms = self._clock.now_ms()
        item = {
            Ledger.KEY: string(key),
            Ledger.STATUS: string(Status.IN_FLIGHT.value),
            Ledger.OWNER: string(owner),
            Ledger.LEASE_EXPIRES_AT: number(lease_expires_at_ms),
            Ledger.EXPIRES_AT: number(now_ms // 1000 + self._ttl_s),
            Ledger.PAYLOAD_HASH: string(payload_hash),
            Ledger.CLAIMED_AT: number(now_ms),
            Ledger.LIFETIME_STARTED_AT: number(now_ms),  # only here: a takeover carries on the dead worker's lifetime
            Ledger.ATTEMPTS: number(1),
        }
        return self._create(item, tenant, now_ms, " OR #owner = :owner", {"#owner": Ledger.OWNER},
                            {":owner": string(owner)})

    def record_expired(self, key: str, payload_hash: str, tenant: str | None = None) -> Claim:
        """Record ``key`` EXPIRED (a job met after its expiresAt, never sent) if it has no live record (won); else
        the record that stands, which decides instead (None if it vanished in between: the caller tries again)."""
        now_ms = self._clock.now_ms()
        item = {
            Ledger.KEY: string(key),
            Ledger.STATUS: string(Status.EXPIRED.value),
            Ledger.FOUND_EXPIRED_AT: number(now_ms),
            Ledger.EXPIRES_AT: number(now_ms // 1000 + self._ttl_s),
            Ledger.PAYLOAD_HASH: string(payload_hash),
            Ledger.LIFETIME_STARTED_AT: number(now_ms),
        }
        return self._create(item, tenant, now_ms)

    def _create(self, item: dict[str, Any], tenant: str | None, now_ms: int, or_also: str = "",
                names: dict[str, str] | None = None, values: dict[str, Any] | None = None) -> Claim:
        """Write ``item`` as the key's record if it has none or only an expired one (or ``or_also`` holds); else
        the record that stands (None if it vanished in between: the caller tries again)."""
        if tenant is not None:
            item[Ledger.TENANT] = string(tenant)
        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=f"attribute_not_exists({KEY}) OR {EXPIRES_AT} < :now_s{or_also}",
                ExpressionAttributeValues={":now_s": number(now_ms // 1000), **(values or {})},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                **({"ExpressionAttributeNames": names} if names else {}),
            )
            return Claim(won=True)
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def read(self, key: str) -> EmailRecord | None:
        """The key's record as it stands (a strongly consistent read), or None when it has none or it expired."""
        item = self._client.get_item(TableName=self._table, Key={KEY: string(key)}, ConsistentRead=True).get("Item")
        if not item:
            return None
        record = EmailRecord.from_item(item)
        return None if record.expired(self._clock.now_ms()) else record

    def take_over(
        self, previous: EmailRecord, owner: str, lease_expires_at_ms: int, payload_hash: str, unsent: bool = False
    ) -> Claim:
        """Take an IN_FLIGHT record whose lease expired (its worker died) for a new attempt; with ``unsent``, a
        live one whose owner surely never sent (a claim whose answer was lost, or whose send SES refused)."""
        now_ms = self._clock.now_ms()
        condition = "#owner = :previous AND #status = :in_flight"
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={KEY: string(previous.key)},
                UpdateExpression=(
                    f"SET #owner = :owner, {LEASE} = :lease, {Ledger.CLAIMED_AT} = :now_ms, "
                    f"{Ledger.PAYLOAD_HASH} = :hash ADD {Ledger.ATTEMPTS} :one"
                ),
                ConditionExpression=condition if unsent else f"{condition} AND {LEASE} < :now_ms",
                ExpressionAttributeNames=NAMES,
                ExpressionAttributeValues={
                    ":owner": string(owner),
                    ":lease": number(lease_expires_at_ms),
                    ":now_ms": number(now_ms),
                    ":hash": string(payload_hash),
                    ":one": number(0 if unsent else 1),  # an unsent claim's attempt sent nothing: not counted
                    ":previous": string(previous.owner),
                    ":in_flight": string(Status.IN_FLIGHT.value),
                },
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            attempts = response.get("Attributes", {}).get(Ledger.ATTEMPTS, {}).get("N")
            return Claim(won=True, attempts=int(attempts) if attempts else previous.attempts)
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def mark_unknown(self, previous: EmailRecord) -> Claim:
        """Record that ``previous``'s worker died after its send may have left: nobody sends this key again."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key={KEY: string(previous.key)},
                UpdateExpression=f"SET #status = :unknown, {Ledger.UNKNOWN_AT} = :now_ms",
                ConditionExpression="#owner = :previous AND #status = :in_flight",
                ExpressionAttributeNames=NAMES,
                ExpressionAttributeValues={
                    ":unknown": string(Status.UNKNOWN.value),
                    ":now_ms": number(self._clock.now_ms()),
                    ":previous": string(previous.owner),
                    ":in_flight": string(Status.IN_FLIGHT.value),
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
            return Claim(won=True, attempts=previous.attempts)
        except ClientError as error:
            return Claim(won=False, existing=self._old_record(error))

    def mark_sent(self, key: str, owner: str, ses_message_id: str) -> Completion:
        """Record the accepted send; not recorded when ``owner`` no longer holds the claim (an operator or a
        takeover). The ids SES's events reported stay in their set; the item as it stood says whether another
        email's id was already there."""
        now_ms = self._clock.now_ms()
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={KEY: string(key)},
                UpdateExpression=(
                    f"SET #status = :sent, {Ledger.SES_MESSAGE_ID} = :message_id, {Ledger.SENT_AT} = :now_ms, "
                    f"{EXPIRES_AT} = :expires REMOVE {LEASE}"
                ),
                ConditionExpression="#owner = :owner",
                ExpressionAttributeNames=NAMES,
                ExpressionAttributeValues={
                    ":sent": string(Status.SENT.value),
                    ":message_id": string(ses_message_id),
                    ":now_ms": number(now_ms),
                    ":expires": number(now_ms // 1000 + self._ttl_s),
                    ":owner": string(owner),
                },
                ReturnValues="ALL_OLD",
            )
        except ClientError as error:
            if condition_failed(error):
                return NOT_RECORDED
            raise
        return Completion(True, second_email(every_ses_message_id(response.get("Attributes", {})), ses_message_id))

    def release(self, key: str, owner: str, attempts: int = 1) -> None:
        """Give up our claim after a definite refusal, so the next delivery may send; never someone else's.

        A first claim with no word from SES is deleted. A takeover's record (``attempts`` > 1) holds the first
        email's history (its attempts, the SES message ids its late events bring), so it is kept, its lease
        ended: the next delivery takes it over at once, and a late event for the first email still finds it.
        """
        if attempts > 1:
            self._end_lease(key, owner)
            return
        try:
            self._client.delete_item(
                TableName=self._table,
                Key={KEY: string(key)},
                ConditionExpression=(f"#owner = :owner AND {Ledger.ATTEMPTS} = :one "
                                     f"AND attribute_not_exists({Ledger.SES_MESSAGE_IDS})"),
                ExpressionAttributeNames={"#owner": Ledger.OWNER},
                ExpressionAttributeValues={":owner": string(owner), ":one": number(1)},
            )
        except ClientError as error:
            if not condition_failed(error):
                raise

    def _end_lease(self, key: str, owner: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={KEY: string(key)},
                # The refused attempt sent nothing: counted apart, so the sends that may have gone stay known.
                UpdateExpression=f"SET {LEASE} = :zero ADD {Ledger.REFUSED_SENDS} :one",
                ConditionExpression="#owner = :owner AND #status = :in_flight",
                ExpressionAttributeNames=NAMES,
                ExpressionAttributeValues={":zero": number(0), ":one": number(1), ":owner": string(owner),
                                           ":in_flight": string(Status.IN_FLIGHT.value)},
            )
        except ClientError as error:
            if not condition_failed(error):
                raise

    def _old_record(self, error: ClientError) -> EmailRecord | None:
        """The item that failed the condition, or None if it vanished in between (the caller tries again)."""
        if not condition_failed(error):
            raise error
        item = found_item(error)
        return EmailRecord.from_item(item) if item else None
