"""The consumer's side of the waiting room (:mod:`sendonce_contract.waiting_room`): a job whose sendAt is further
ahead than SQS can delay a message, or a job parked while SES stops sending, is written there once and acknowledged,
instead of waiting as a chain of 15-minute delayed copies (4 to 12 requests an hour). The schedule watch sends it
back to its lane's queue shortly before its sendAt, or once SES says it sends again. Nothing is claimed meanwhile,
so its key can still be cancelled.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.waiting_room import (
    DUE,
    MAX_REQUEST_BYTES,
    REQUEST,
    ROOM,
    ROOM_AFTER_S,
    StopMarker,
    item,
    room_of,
    stop_room_of,
)

from .dynamodb_values import MAX_BATCH_WRITES, condition_failed, found_item, write_batch

if TYPE_CHECKING:
    from .ses_stops import LaneStop


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
        written = item(room_of(self._lane), due_ms, dedupe_key, request)
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

    def park(self, stop: LaneStop, jobs: Sequence[tuple[Mapping[str, Any], str, int]]) -> set[int]:
        """A batch's jobs parked by ``stop`` (each its request, its key and the latest it may wait, epoch ms), written
        to the stop's room: the indices of those the room holds. The jobs first (25 a request), then the stop's
        marker with a new token (one UpdateItem a batch, which makes it again if the watch removed it meanwhile): the
        watch removes a marker only while its token is the one it read with the room empty, so a job written after
        that read always has a marker that leads the watch to it. Those not written (too large for an item,
        DynamoDB's refusal) wait as delayed copies; with no marker written, none is held, and those written are
        taken out again."""
        room = stop_room_of(self._lane, stop.board_scope)
        fitting = {n: written for n, (request, dedupe_key, bound_ms) in enumerate(jobs)
                   if len((written := item(room, bound_ms, dedupe_key, request))[REQUEST]["S"].encode())
                   <= MAX_REQUEST_BYTES}
        numbers = list(fitting)
        parked: set[int] = set()
        for start in range(0, len(numbers), MAX_BATCH_WRITES):
            parked.update(self._write_all({n: fitting[n] for n in numbers[start:start + MAX_BATCH_WRITES]}))
        if parked and not self._mark(StopMarker(room, self._lane, stop.kind, stop.reason, stop.stop_key,
                                                stop.tenant_name, uuid.uuid4().hex)):
            self._take_out([fitting[n] for n in parked])
            return set()
        return parked

    def _mark(self, marker: StopMarker) -> bool:
        """The stop's marker written (an update, not a put: the watch's note of its last release on SES's word,
        RELEASED_AT, stays)."""
        written = marker.item()
        key = {ROOM: written.pop(ROOM), DUE: written.pop(DUE)}
        try:
            self._client.update_item(
                TableName=self._table, Key=key,
                ExpressionAttributeNames={f"#{n}": name for n, name in enumerate(written)},
                UpdateExpression="SET " + ", ".join(f"#{n} = :{n}" for n in range(len(written))),
                ExpressionAttributeValues={f":{n}": value for n, value in enumerate(written.values())})
        except (ClientError, BotoCoreError):
            return False
        return True

    def _take_out(self, items: list[dict[str, dict[str, str]]]) -> None:
        """Jobs written without a marker, deleted again (best effort: their messages wait as delayed copies)."""
        for start in range(0, len(items), MAX_BATCH_WRITES):
            with contextlib.suppress(ClientError, BotoCoreError):
                write_batch(self._client, self._table, [
                    {"DeleteRequest": {"Key": {ROOM: written[ROOM], DUE: written[DUE]}}}
                    for written in items[start:start + MAX_BATCH_WRITES]])

    def _write_all(self, items: dict[int, dict[str, dict[str, str]]]) -> set[int]:
        """The items DynamoDB took of one BatchWriteItem (its unprocessed ones tried once more)."""
        try:
            left = write_batch(self._client, self._table, [{"PutRequest": {"Item": written}}
                                                           for written in items.values()])
        except (ClientError, BotoCoreError):
            return set()  # not known to be written: each waits as a delayed copy (a second one in the room is harmless)
        unprocessed = {(put["PutRequest"]["Item"][ROOM]["S"], put["PutRequest"]["Item"][DUE]["S"]) for put in left}
        return {n for n, written in items.items() if (written[ROOM]["S"], written[DUE]["S"]) not in unprocessed}
