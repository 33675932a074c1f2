"""Reads and resolves dedupe records, every write conditional on the state the operator saw."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.schema import SES_EVENT_TYPES, Ledger, Status

# What each SES event says became of an email, as `sendonce status` shows it.


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

        outcomes = sorted(
            ((event.label, number(event.time_attribute),
              "/".join(text(name) for name in event.outcome_attributes))
             for event in SES_EVENT_TYPES if event.label is not None and event.time_attribute in item),
            key=lambda outcome: outcome[1] or 0,
        )
        return cls(
            key=item[Ledger.KEY]["S"], status=item[Ledger.STATUS]["S"], owner=text(Ledger.OWNER),
            attempts=number(Ledger.ATTEMPTS) or 0, ses_message_id=item.get(Ledger.SES_MESSAGE_ID, {}).get("S"),
            claimed_at_ms=number(Ledger.CLAIMED_AT), sent_at_ms=number(Ledger.SENT_AT),
            unknown_at_ms=number(Ledger.UNKNOWN_AT), lease_expires_at_ms=number(Ledger.LEASE_EXPIRES_AT),
            expires_at_s=number(Ledger.EXPIRES_AT),
            ses_message_ids=tuple(sorted(item.get(Ledger.SES_MESSAGE_IDS, {}).get("SS", []))),
            ses_accepted_at_ms=number(Ledger.SES_ACCEPTED_AT), evidence_at_ms=number(Ledger.EVIDENCE_AT),
            outcomes=tuple(outcomes),
        )

    @property
    def double_send(self) -> bool:
        """Two emails went out for this key: SES reported two message ids, or reported one other than the id the
        consumer recorded from SES's answer (the residual when events for one of them were lost)."""
        return len(self.every_ses_message_id) >= 2

    @property
    def every_ses_message_id(self) -> tuple[str, ...]:
        """The ids SES's events reported and the one the consumer recorded from SES's answer, as one set."""
        recorded = {self.ses_message_id} if self.ses_message_id else set()
        return tuple(sorted(set(self.ses_message_ids) | recorded))

    def expired(self, now_ms: int) -> bool:
        return self.expires_at_s is not None and self.expires_at_s * 1000 < now_ms

    def needs_a_decision(self, now_ms: int) -> bool:
        """UNKNOWN, or IN_FLIGHT with a lease its worker cannot still hold."""
        lease_over = self.lease_expires_at_ms is not None and self.lease_expires_at_ms < now_ms
        undecided = self.status == Status.UNKNOWN.value or (self.status == Status.IN_FLIGHT.value and lease_over)
        return not self.expired(now_ms) and undecided

    @property
    def last_change_ms(self) -> int:
        return max(v or 0 for v in (self.claimed_at_ms, self.sent_at_ms, self.unknown_at_ms))

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "every_ses_message_id": list(self.every_ses_message_id),
                "double_send": self.double_send}


class StateChanged(RuntimeError):
    """The record moved on since it was read; nothing was written."""


class LedgerView:
    def __init__(self, client: Any, table: str, now_ms: Callable[[], int] | None = None) -> None:
        self._client = client
        self._table = table
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)

    def get(self, key: str) -> Record | None:
        item = self._client.get_item(TableName=self._table, Key={Ledger.KEY: {"S": key}}, ConsistentRead=True)
        return Record.from_item(item["Item"]) if "Item" in item else None

    def needing_a_decision(self, on_page: Callable[[int], None] | None = None) -> list[Record]:
        now = self._now_ms()
        found = [r for r in self._scan(on_page) if r.needs_a_decision(now)]
        return sorted(found, key=lambda r: r.last_change_ms, reverse=True)

    def double_sends(self, on_page: Callable[[int], None] | None = None) -> list[Record]:
        """Keys SES's events show were sent twice, newest first."""
        now = self._now_ms()
        request = {"FilterExpression": f"attribute_exists({Ledger.SES_MESSAGE_IDS})"}
        found = [r for r in self._scan(on_page, request) if r.double_send and not r.expired(now)]
        return sorted(found, key=lambda r: r.evidence_at_ms or r.last_change_ms, reverse=True)

    def _scan(self, on_page: Callable[[int], None] | None, filters: dict[str, Any] | None = None) -> Iterator[Record]:
        request: dict[str, Any] = {"TableName": self._table, **(filters or {
            "FilterExpression": "#s IN (:unknown, :in_flight)",
            "ExpressionAttributeNames": {"#s": Ledger.STATUS},
            "ExpressionAttributeValues": {":unknown": {"S": Status.UNKNOWN.value},
                                          ":in_flight": {"S": Status.IN_FLIGHT.value}},
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
            "ExpressionAttributeNames": {"#o": Ledger.OWNER, "#s": Ledger.STATUS},
        }
        values = {":owner": {"S": record.owner}, ":status": {"S": record.status}}
        if record.status == Status.IN_FLIGHT.value:
            condition["ConditionExpression"] += f" AND {Ledger.LEASE_EXPIRES_AT} < :now"
            values[":now"] = {"N": str(now)}
        try:
            if sent:
                self._client.update_item(
                    TableName=self._table, Key={Ledger.KEY: {"S": key}},
                    UpdateExpression=(f"SET #s = :sent, {Ledger.RESOLVED_AT} = :now_ms, "
                                      f"{Ledger.RESOLVED_BY} = :operator REMOVE {Ledger.LEASE_EXPIRES_AT}"),
                    ExpressionAttributeValues={**values, ":sent": {"S": Status.SENT.value},
                                               ":now_ms": {"N": str(now)},
                                               ":operator": {"S": "operator"}},
                    **condition,
                )
            else:
                self._client.delete_item(TableName=self._table, Key={Ledger.KEY: {"S": key}},
                                         ExpressionAttributeValues=values, **condition)
        except ClientError as error:
            if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise StateChanged(f"{key} changed while you looked at it; nothing was written. Look again.") from None
            raise
        return record
