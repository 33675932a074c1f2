"""Reads and resolves dedupe records, every write conditional on the state the operator saw."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError


@dataclass(frozen=True)
class Record:
    key: str
    status: str
    owner: str
    attempts: int
    ses_message_id: str | None
    claimed_at_ms: int | None
    sent_at_ms: int | None
    unknown_at_ms: int | None
    lease_expires_at_ms: int | None
    expires_at_s: int | None
    # What SES's events said (written by the recorder): every message id SES reported, and what became of them.
    ses_message_ids: tuple[str, ...] = ()
    ses_accepted_at_ms: int | None = None
    evidence_at_ms: int | None = None
    outcomes: tuple[tuple[str, int | None, str], ...] = ()  # (what, when, detail), in the order they happened

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Record:
        def number(name: str) -> int | None:
            return int(item[name]["N"]) if name in item else None

        def text(name: str) -> str:
            return str(item.get(name, {}).get("S", ""))

        details = {"delivered": "", "bounced": f"{text('bounceType')}/{text('bounceSubType')}",
                   "complained": text("complaintFeedbackType"), "rejected": text("rejectReason"),
                   "delayed": text("delayType"), "rendering failed": text("renderingError")}
        attributes = {"delivered": "deliveredAt", "bounced": "bouncedAt", "complained": "complainedAt",
                      "rejected": "rejectedAt", "delayed": "delayedAt", "rendering failed": "renderingFailedAt"}
        outcomes = sorted(((what, number(name), details[what]) for what, name in attributes.items() if name in item),
                          key=lambda outcome: outcome[1] or 0)
        return cls(
            key=item["dedupeKey"]["S"], status=item["status"]["S"], owner=item.get("owner", {}).get("S", ""),
            attempts=number("attempts") or 0, ses_message_id=item.get("sesMessageId", {}).get("S"),
            claimed_at_ms=number("claimedAt"), sent_at_ms=number("sentAt"), unknown_at_ms=number("unknownAt"),
            lease_expires_at_ms=number("leaseExpiresAt"), expires_at_s=number("expiresAt"),
            ses_message_ids=tuple(sorted(item.get("sesMessageIds", {}).get("SS", []))),
            ses_accepted_at_ms=number("sesAcceptedAt"), evidence_at_ms=number("evidenceAt"),
            outcomes=tuple(outcomes),
        )

    @property
    def double_send(self) -> bool:
        """SES reported two emails for this key: the residual when its events for the first were lost."""
        return len(self.ses_message_ids) >= 2

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_s is not None and self.expires_at_s * 1000 < now_ms

    def needs_a_decision(self, now_ms: int) -> bool:
        """UNKNOWN, or IN_FLIGHT with a lease its worker cannot still hold."""
        lease_over = self.lease_expires_at_ms is not None and self.lease_expires_at_ms < now_ms
        return not self.expired(now_ms) and (self.status == "UNKNOWN" or (self.status == "IN_FLIGHT" and lease_over))

    @property
    def last_change_ms(self) -> int:
        return max(v or 0 for v in (self.claimed_at_ms, self.sent_at_ms, self.unknown_at_ms))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class StateChanged(RuntimeError):
    """The record moved on since it was read; nothing was written."""


class LedgerView:
    def __init__(self, client: Any, table: str, now_ms: Callable[[], int] | None = None) -> None:
        self._client = client
        self._table = table
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)

    def get(self, key: str) -> Record | None:
        item = self._client.get_item(TableName=self._table, Key={"dedupeKey": {"S": key}}, ConsistentRead=True)
        return Record.from_item(item["Item"]) if "Item" in item else None

    def needing_a_decision(self, on_page: Callable[[int], None] | None = None) -> list[Record]:
        now = self._now_ms()
        found = [r for r in self._scan(on_page) if r.needs_a_decision(now)]
        return sorted(found, key=lambda r: r.last_change_ms, reverse=True)

    def double_sends(self, on_page: Callable[[int], None] | None = None) -> list[Record]:
        """Keys SES's events show were sent twice, newest first."""
        now = self._now_ms()
        request = {"FilterExpression": "attribute_exists(sesMessageIds)"}
        found = [r for r in self._scan(on_page, request) if r.double_send and not r.expired(now)]
        return sorted(found, key=lambda r: r.evidence_at_ms or r.last_change_ms, reverse=True)

    def _scan(self, on_page: Callable[[int], None] | None, filters: dict[str, Any] | None = None) -> Iterator[Record]:
        request: dict[str, Any] = {"TableName": self._table, **(filters or {
            "FilterExpression": "#s IN (:unknown, :in_flight)",
            "ExpressionAttributeNames": {"#s": "status"},
            "ExpressionAttributeValues": {":unknown": {"S": "UNKNOWN"}, ":in_flight": {"S": "IN_FLIGHT"}},
        })}
        scanned = 0
        while True:
            page = self._client.scan(**request)
            scanned += page.get("ScannedCount", 0)
            if on_page is not None:
                on_page(scanned)
            yield from (Record.from_item(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def resolve(self, key: str, sent: bool) -> Record:
        """Mark ``key`` SENT (the operator confirmed delivery) or delete it (so the next delivery sends it).

        Conditional on the owner and status just read, and on the record still needing a decision, so it never
        races a live consumer: a record that changed in between raises :class:`StateChanged`.
        """
        record = self.get(key)
        now = self._now_ms()
        if record is None or not record.needs_a_decision(now):
            state = "never seen" if record is None else record.status + (" (expired)" if record.expired(now) else "")
            raise StateChanged(f"{key} is {state}: only UNKNOWN records and IN_FLIGHT records with an expired "
                               "lease are resolved")
        condition: dict[str, Any] = {
            "ConditionExpression": "#o = :owner AND #s = :status",
            "ExpressionAttributeNames": {"#o": "owner", "#s": "status"},
        }
        values = {":owner": {"S": record.owner}, ":status": {"S": record.status}}
        if record.status == "IN_FLIGHT":
            condition["ConditionExpression"] += " AND leaseExpiresAt < :now"
            values[":now"] = {"N": str(now)}
        try:
            if sent:
                self._client.update_item(
                    TableName=self._table, Key={"dedupeKey": {"S": key}},
                    UpdateExpression=(
                        "SET #s = :sent, resolvedAt = :now_ms, resolvedBy = :operator REMOVE leaseExpiresAt"
                    ),
                    ExpressionAttributeValues={**values, ":sent": {"S": "SENT"}, ":now_ms": {"N": str(now)},
                                               ":operator": {"S": "operator"}},
                    **condition,
                )
            else:
                self._client.delete_item(TableName=self._table, Key={"dedupeKey": {"S": key}},
                                         ExpressionAttributeValues=values, **condition)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise StateChanged(f"{key} changed while you looked at it; nothing was written. Look again.") from None
            raise
        return record
