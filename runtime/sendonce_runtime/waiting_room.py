"""The consumer's side of the waiting room (:mod:`sendonce_contract.waiting_room`): a job whose sendAt is further
ahead than SQS can delay a message is written there once and acknowledged, instead of waiting as a chain of
15-minute delayed copies (12 requests an hour). The schedule watch sends it back to its lane's queue shortly before
its sendAt. Nothing is claimed meanwhile, so its key can still be cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sendonce_contract.waiting_room import MAX_REQUEST_BYTES, REQUEST, item

from .aws_errors import LEDGER_ERRORS


class WaitingRoom:
    def __init__(self, client: Any, table: str, lane: str) -> None:
        self._client = client
        self._table = table
        self._lane = lane

    def admit(self, request: Mapping[str, Any], due_ms: int, dedupe_key: str) -> bool:
        """Whether the job waits in the room now. False, and nothing lost, when it is larger than an item holds or
        DynamoDB did not take it: it waits as delayed copies. A write whose answer was lost may have taken it too;
        then both bring the job back at its sendAt, and the ledger sends it once."""
        written = item(self._lane, due_ms, dedupe_key, request)
        if len(written[REQUEST]["S"].encode()) > MAX_REQUEST_BYTES:
            return False
        try:
            # The same job delivered twice writes the same item: it waits once.
            self._client.put_item(TableName=self._table, Item=written)
        except LEDGER_ERRORS:
            return False
        return True
