"""Reads and resolves dedupe records, every write conditional on the state the operator saw."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import Ledger, Status


class StateChanged(RuntimeError):
    """The record moved on since it was read; nothing was written."""


class LedgerView:
    def __init__(self, client: Any, table: str, now_ms: Callable[[], int] | None = None) -> None:
        self._client = client
        self._table = table
        self._now_ms = now_ms or (lambda: time.time_ns() // 1_000_000)

    def get(self, key: str) -> EmailRecord | None:
        item = self._client.get_item(TableName=self._table, Key={Ledger.KEY: {"S": key}}, ConsistentRead=True)
        return EmailRecord.from_item(item["Item"]) if "Item" in item else None

    def needing_a_decision(self, on_page: Callable[[int], None] | None = None) -> list[EmailRecord]:
        now = self._now_ms()
        found = [r for r in self._scan(on_page) if r.needs_a_decision(now)]
        return sorted(found, key=lambda r: r.last_change_ms, reverse=True)

    def double_sends(self, on_page: Callable[[int], None] | None = None) -> list[EmailRecord]:
        """Keys SES's events show were sent twice, newest first."""
        now = self._now_ms()
        request = {"FilterExpression": f"attribute_exists({Ledger.SES_MESSAGE_IDS})"}
        found = [r for r in self._scan(on_page, request) if r.double_send and not r.expired(now)]
        return sorted(found, key=lambda r: r.evidence_at_ms or r.last_change_ms, reverse=True)

    def _scan(
        self, on_page: Callable[[int], None] | None, filters: dict[str, Any] | None = None
    ) -> Iterator[EmailRecord]:
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
            yield from (EmailRecord.from_item(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def resolve(self, key: str, sent: bool) -> EmailRecord:
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
