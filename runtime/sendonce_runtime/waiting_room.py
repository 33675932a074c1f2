"""The consumer's side of the waiting room (:mod:`sendonce_contract.waiting_room`): a job whose sendAt is further
ahead than SQS can delay a message is written there once and acknowledged, instead of waiting as a chain of
15-minute delayed copies (12 requests an hour). The schedule watch sends it back to its lane's queue shortly before
its sendAt. Nothing is claimed meanwhile, so its key can still be cancelled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.waiting_room import DUE, MAX_REQUEST_BYTES, REQUEST, ROOM_AFTER_S, item

from .dynamodb_values import condition_failed, found_item


class WaitingRoom:
    after_s = ROOM_AFTER_S  # it holds a job due further ahead than this; a nearer one waits as one delayed copy

    def __init__(self, client: Any, table: str, lane: str) -> None:
        self._client = client
        self._table = table
        self._lane = lane

    def admit(self, request: Mapping[str, Any], due_ms: int, dedupe_key: str) -> bool:
        """Whether the job waits in the room now (or waited there already: the same job delivered again). False,
        and nothing lost, when it is larger than an item holds, DynamoDB did not take it, or another job of the
        same key and time waits there (different content: it meets the ledger as delayed copies, as any such
        job does). A write whose answer was lost may have taken it too; then both bring the job back at its
        sendAt, and the ledger sends it once."""
        written = item(self._lane, due_ms, dedupe_key, request)
        if len(written[REQUEST]["S"].encode()) > MAX_REQUEST_BYTES:
            return False
        try:
            self._client.put_item(TableName=self._table, Item=written, ConditionExpression="attribute_not_exists(#due)",
                                  ExpressionAttributeNames={"#due": DUE}, ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as error:
            if not condition_failed(error):
                return False
            waiting = found_item(error)  # the job again (its body the same: a redelivery, a re-enqueue) waits once
            return waiting is not None and json.loads(waiting[REQUEST]["S"])["MessageBody"] == request["MessageBody"]
        except BotoCoreError:
            return False
        return True
