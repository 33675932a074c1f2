"""The schedule watch: run each minute by an EventBridge schedule, it sends the jobs the waiting room holds back to
their lane's queue: a scheduled job shortly before its sendAt, a parked job once SES sends again. Handler
``sendonce_runtime.schedule_watch.handler``.

Each run reads each lane's room in due order (one Query a page) for the jobs due before its next two runs, sends
each back as a delayed message due at its sendAt (``SendMessageBatch``, ten a request), and only then deletes its
item (``BatchWriteItem``, 25 a request). Killed between the two, a job is sent back again by the next run: the
consumer's ledger sends it once. A job whose send SQS refused stays in the room for the next run.

Then SES's stops: one Query finds every stop the room holds jobs for (a marker each). A stop is over when the lane's
stop item says so (a consumer's probe saw SES accept a send) or when SES's own status says it sends again
(:mod:`.ses_status`; the watch then marks the stop item over, so the lane's instances send again too). An over
stop's jobs go back at once, in the order they were parked, marked so each goes to SES whatever its consumer last
heard; a stop that holds sends back only the jobs whose wait reached the queue's retention (their consumer
dead-letters them as ``ses-paused``). One JSON line a run says what it released (``ScheduledReleased`` and
``ParkedReleased``, EMF metrics with the pipeline's name) and what it left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TextIO

from botocore.exceptions import ClientError

from sendonce_contract.priority import Priority
from sendonce_contract.schema import CopyAttribute, Metric, ReasonCode
from sendonce_contract.sqs_limits import SQS_MAX_DELAY_S
from sendonce_contract.waiting_room import (
    BELIEVED_AGAIN_AFTER_S,
    DUE,
    DUE_DIGITS,
    KEY,
    PAGE_ITEMS,
    RELEASE_AHEAD_S,
    REQUEST,
    ROOM,
    STOPS,
    ScheduleWatchConfig,
    StopMarker,
    due_ms_of,
    room_of,
)

from .clock import Clock, SystemClock
from .dead_letter import DeadLetterQueue
from .dynamodb_values import MAX_BATCH_WRITES, condition_failed, write_batch
from .metrics import emf_values
from .shell import JsonLog, Once
from .sqs_answers import Answer, Refusal, call, call_batched
from .sqs_record import SqsRecord

# A run stops starting new pages this long before its deadline: a page's sends and deletes fit in what is left.
PAGE_MARGIN_MS = 10_000
# What SQS says of a message it will never take (beside its too-long codes): moved to the DLQ, not tried each run.
MESSAGE_REFUSALS = frozenset({"InvalidParameterValue", "InvalidMessageContents", "InvalidAttributeName",
                              "InvalidAttributeValue"})


class Released(NamedTuple):
    released: int  # sent back to their queue and gone from the room
    left: int  # due, but still in the room (SQS refused, or the run ran out of time): the next run sends them
    unparked: int = 0  # of those released, the parked jobs of a stop that is over


class _Pages:
    """What one read of a room's due items came to: whether it read to the end (not stopped for time), and whether
    every item it read left the room."""

    __slots__ = ("all_gone", "read_to_the_end")

    def __init__(self) -> None:
        self.all_gone = True
        self.read_to_the_end = False


class _Lane(NamedTuple):
    name: str
    queue_url: str
    dead_letter_queue_url: str | None


class ScheduleWatch:
    def __init__(self, config: ScheduleWatchConfig, dynamodb: Any, sqs: Any, clock: Clock | None = None,
                 stream: TextIO | None = None, ses: Any = None) -> None:
        self._config = config
        self._dynamodb = dynamodb
        self._sqs = sqs
        self._ses = ses  # asked whether a stopped scope sends again
        self._clock = clock or SystemClock()
        self._log = JsonLog(stream, config.pipeline_name)

    def run(self, remaining_ms: Callable[[], int] = lambda: 60_000) -> Released:
        tally = {"released": 0, "left": 0, "deadLettered": 0, "unparked": 0}
        lanes = {Priority.BULK.value: _Lane(Priority.BULK.value, self._config.queue_url,
                                            self._config.dead_letter_queue_url)}
        if self._config.urgent_queue_url:  # first: one-time codes never wait behind a campaign's release
            lanes = {Priority.URGENT.value: _Lane(Priority.URGENT.value, self._config.urgent_queue_url,
                                                  self._config.urgent_dead_letter_queue_url), **lanes}
        limit_ms = self._clock.now_ms() + RELEASE_AHEAD_S * 1000
        for lane in lanes.values():
            self._release(lane, room_of(lane.name), limit_ms, None, remaining_ms, tally)
        if self._config.ledger_table_name:
            self._release_stops(lanes, remaining_ms, tally)
        line: dict[str, Any] = {"level": "INFO", "logger": "sendonce.schedule", **tally}
        if self._config.pipeline_name is not None:
            line.update(emf_values(self._config.pipeline_name, {
                Metric.SCHEDULED_RELEASED: (tally["released"] - tally["unparked"], "Count"),
                Metric.PARKED_RELEASED: (tally["unparked"], "Count"),
                Metric.SCHEDULED_LEFT: (tally["left"], "Count")}, self._clock.now_ms()))
        self._log.emit(line)
        return Released(tally["released"], tally["left"], tally["unparked"])

    def _release(self, lane: _Lane, room: str, limit_ms: int, unparked_at_ms: int | None,
                 remaining_ms: Callable[[], int], tally: dict[str, int]) -> bool:
        """The room's jobs due before ``limit_ms`` sent back to the lane's queue and deleted; whether none is left
        (each was deleted, and the run read to the end of what is due, not stopped early for time)."""
        pages = _Pages()
        for page in self._due(room, limit_ms, remaining_ms, pages):
            entries = {str(n): self._entry(item, room == room_of(lane.name), unparked_at_ms)
                       for n, item in enumerate(page)}
            sent, refused = self._send_back(lane.queue_url, page, entries)
            gone = sent + self._dead_letter(lane.dead_letter_queue_url, lane.queue_url, refused)
            tally["deadLettered"] += len(gone) - len(sent)  # (or sent alone at the second try)
            deleted = self._delete(gone)
            tally["released"] += deleted
            if unparked_at_ms is not None:
                tally["unparked"] += deleted
            # Sent but not deleted stays: the next run sends it again (the ledger sends it once) and deletes it.
            tally["left"] += len(page) - deleted
            pages.all_gone = pages.all_gone and deleted == len(page)
        return pages.all_gone and pages.read_to_the_end

    def _release_stops(self, lanes: dict[str, _Lane], remaining_ms: Callable[[], int],
                       tally: dict[str, int]) -> None:
        """Each stop's parked jobs: all of them once it is over, else those whose wait reached its bound."""
        assert self._config.ledger_table_name is not None
        from .ses_status import SesStatus
        from .ses_stops import mark_resumed, stop_live

        status = SesStatus(self._ses, self._config.sender_identity, self._config.configuration_set)
        markers = [StopMarker.from_item(item) for item in self._markers()]
        order = list(lanes)
        for marker in sorted(markers, key=lambda m: order.index(m.lane) if m.lane in order else len(order)):
            lane = lanes.get(marker.lane)
            if lane is None or remaining_ms() <= PAGE_MARGIN_MS:
                continue
            now_ms = self._clock.now_ms()
            # Over when the lane's stop item says so (a consumer's probe saw SES accept a send); a stop item gone
            # (a week unwritten: its TTL) leaves it to SES's word.
            over = stop_live(self._dynamodb, self._config.ledger_table_name, marker.stop_key) is False
            on_ses_word = False
            # SES's word is not asked while a release on it was contradicted lately (the stop holds again: SES
            # refused the jobs its status said it would send).
            if not over and not _believed_lately(marker, now_ms) and status.sends_again(marker.kind,
                                                                                       marker.tenant_name):
                mark_resumed(self._dynamodb, self._config.ledger_table_name, marker.stop_key, now_ms)
                over = on_ses_word = True
            if not over:
                self._release(lane, marker.room, now_ms, None, remaining_ms, tally)  # those at their bound
                continue
            if on_ses_word:
                self._note_release(marker, now_ms)
            none_left = self._release(lane, marker.room, 10 ** DUE_DIGITS, now_ms, remaining_ms, tally)
            if none_left and not _believed_lately(marker, now_ms) and not on_ses_word:
                self._remove(marker)

    def _markers(self) -> Iterator[dict[str, Any]]:
        """Every stop the room holds jobs for."""
        for page in self._pages(lambda: True, KeyConditionExpression="#room = :room",
                                ExpressionAttributeNames={"#room": ROOM},
                                ExpressionAttributeValues={":room": {"S": STOPS}}):
            yield from page

    def _pages(self, more: Callable[[], bool], read: _Pages | None = None,
               **query: Any) -> Iterator[list[dict[str, Any]]]:
        """A Query of the room, a page at a time, while ``more()`` allows another (``read`` says whether it read to
        the end)."""
        start: dict[str, Any] | None = None
        while more():
            page = self._dynamodb.query(TableName=self._config.table_name, ConsistentRead=True, **query,
                                        **({"ExclusiveStartKey": start} if start else {}))
            if page.get("Items"):
                yield page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                if read is not None:
                    read.read_to_the_end = True
                return

    def _note_release(self, marker: StopMarker, now_ms: int) -> None:
        """The marker remembers a release on SES's word, so a stop SES's refusals renew is not released on its
        word again for a while."""
        try:
            self._dynamodb.update_item(
                TableName=self._config.table_name, Key={ROOM: {"S": STOPS}, DUE: {"S": marker.room}},
                UpdateExpression="SET #released = :now", ConditionExpression="attribute_exists(#room)",
                ExpressionAttributeNames={"#released": StopMarker.RELEASED_AT, "#room": ROOM},
                ExpressionAttributeValues={":now": {"N": str(now_ms)}})
        except ClientError as error:
            if not condition_failed(error):  # gone: another run released the stop and removed it
                raise

    def _remove(self, marker: StopMarker) -> None:
        """The marker of an over stop whose jobs are all back, removed unless a consumer parked a job since (its
        token changed): then the next run finds that job."""
        try:
            self._dynamodb.delete_item(
                TableName=self._config.table_name, Key={ROOM: {"S": STOPS}, DUE: {"S": marker.room}},
                ConditionExpression="#token = :token", ExpressionAttributeNames={"#token": StopMarker.TOKEN},
                ExpressionAttributeValues={":token": {"S": marker.token}})
        except ClientError as error:
            if not condition_failed(error):
                raise

    def _due(self, room: str, limit_ms: int, remaining_ms: Callable[[], int],
             pages: _Pages | None = None) -> Iterator[list[dict[str, Any]]]:
        """The room's items due before ``limit_ms``, a page at a time, while the run has time for a page (``pages``
        says whether it read to the end)."""
        limit = f"{min(limit_ms, 10 ** DUE_DIGITS - 1):0{DUE_DIGITS}d}~"
        yield from self._pages(lambda: remaining_ms() > PAGE_MARGIN_MS, pages,
                               KeyConditionExpression="#room = :room AND #due < :limit",
                               ExpressionAttributeNames={"#room": ROOM, "#due": DUE},
                               ExpressionAttributeValues={":room": {"S": room}, ":limit": {"S": limit}},
                               Limit=PAGE_ITEMS)

    def _entry(self, item: dict[str, Any], scheduled: bool, unparked_at_ms: int | None) -> dict[str, Any]:
        """The SendMessage entry that puts an item's job back: a scheduled one delayed until its due time, a parked
        one at once, marked unparked when its stop is over."""
        request = json.loads(item[REQUEST]["S"])
        wait_s = math.ceil((due_ms_of(item[DUE]["S"]) - self._clock.now_ms()) / 1000)
        entry = {**request, "DelaySeconds": max(0, min(wait_s, SQS_MAX_DELAY_S)) if scheduled else 0}
        if unparked_at_ms is not None:
            entry["MessageAttributes"] = {**request.get("MessageAttributes", {}), CopyAttribute.UNPARKED_AT: {
                "DataType": "Number", "StringValue": str(unparked_at_ms)}}
        return entry

    def _send_back(self, queue_url: str, items: list[dict[str, Any]], entries: dict[str, dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], dict[str, Any]]]]:
        """Each item's job sent to its queue (``entries``, by the item's index): the items SQS took, and those it
        refused, each with its entry."""
        answers = call_batched(self._sqs.send_message_batch, queue_url, entries)
        # Only what SQS surely took leaves the room: a send whose answer was lost may not have gone, and is sent
        # again by the next run (the ledger absorbs a second one).
        return ([items[int(n)] for n, answer in answers.items() if answer is Answer.DONE],
                [(items[int(n)], entries[n]) for n, answer in answers.items() if answer is Answer.REFUSED])

    def _dead_letter(self, dead_letter_queue_url: str | None, queue_url: str,
                     refused: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
        """The jobs SQS refused to take back, each tried once more alone: sent then, or, refused for what the
        message is (too long, too many attributes: it would be refused every run), moved to its lane's DLQ with
        SQS's reason, where a redrive sends it once the producer fixed it. Any other refusal (access, a key) leaves
        it in the room for the next run. The items now out of the room."""
        gone = []
        dead_letters = DeadLetterQueue(self._sqs, dead_letter_queue_url, fifo=False) if dead_letter_queue_url else None
        for item, request in refused:
            said: list[Refusal] = []
            answer = call(self._sqs.send_message, said, QueueUrl=queue_url, **{**request, "DelaySeconds": 0})
            if answer is Answer.DONE:
                gone.append(item)
                continue
            refusal = said[0] if said else None
            if dead_letters is None or refusal is None or not (refusal.too_long or refusal.code in MESSAGE_REFUSALS):
                continue
            record = SqsRecord.from_message({
                "MessageId": f"waiting-room {item[DUE]['S']}", "ReceiptHandle": "", "Body": request["MessageBody"],
                "MessageAttributes": request.get("MessageAttributes", {}),
                "Attributes": {"MessageGroupId": request["MessageGroupId"]} if "MessageGroupId" in request else {}},
                queue_url)
            reason = (f"SQS refused to take it back from the waiting room ({refusal}), as it would "
                      "every time: make the job smaller, or give it fewer message attributes, then redrive it")
            if dead_letters.send(record, ReasonCode.INVALID_MESSAGE, reason, item[KEY]["S"]):
                gone.append(item)
        return gone

    def _delete(self, items: list[dict[str, Any]]) -> int:
        deleted = 0
        for start in range(0, len(items), MAX_BATCH_WRITES):
            chunk = items[start:start + MAX_BATCH_WRITES]
            left = write_batch(self._dynamodb, self._config.table_name, [  # those left are sent again next run
                {"DeleteRequest": {"Key": {ROOM: item[ROOM], DUE: item[DUE]}}} for item in chunk])
            deleted += len(chunk) - len(left)
        return deleted


def _believed_lately(marker: StopMarker, now_ms: int) -> bool:
    """Whether the watch released the stop's jobs on SES's word within ``BELIEVED_AGAIN_AFTER_S``."""
    return marker.released_at_ms is not None and now_ms - marker.released_at_ms < BELIEVED_AGAIN_AFTER_S * 1000


def _build() -> ScheduleWatch:
    from . import aws_clients

    return ScheduleWatch(ScheduleWatchConfig.from_env(), aws_clients.recorder_client("dynamodb"),
                         aws_clients.recorder_client("sqs"), ses=aws_clients.recorder_client("sesv2"))


_watch = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    return _watch.get().run(context.get_remaining_time_in_millis)._asdict()
