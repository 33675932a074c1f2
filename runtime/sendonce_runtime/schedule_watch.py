"""The schedule watch: run each minute by an EventBridge schedule, it sends the jobs the waiting room holds back to
their lane's queue shortly before their sendAt. Handler ``sendonce_runtime.schedule_watch.handler``.

Each run reads each lane's room in due order (one Query a page) for the jobs due before its next two runs, sends
each back as a delayed message due at its sendAt (``SendMessageBatch``, ten a request), and only then deletes its
item (``BatchWriteItem``, 25 a request). Killed between the two, a job is sent back again by the next run: the
consumer's ledger sends it once. A job whose send SQS refused stays in the room for the next run. One JSON line a
run says what it released (``ScheduledReleased``, an EMF metric with the pipeline's name) and what it left.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TextIO

from sendonce_contract.priority import Priority
from sendonce_contract.schema import Metric, ReasonCode
from sendonce_contract.sqs_limits import SQS_MAX_DELAY_S
from sendonce_contract.waiting_room import (
    DUE,
    DUE_DIGITS,
    KEY,
    PAGE_ITEMS,
    RELEASE_AHEAD_S,
    REQUEST,
    ROOM,
    ScheduleWatchConfig,
    due_ms_of,
    room_of,
)

from .clock import Clock, SystemClock
from .dead_letter import DeadLetterQueue
from .metrics import emf_values
from .shell import JsonLog, Once
from .sqs_answers import Answer, Refusal, call, call_batched
from .sqs_record import SqsRecord

DYNAMODB_MAX_BATCH_WRITES = 25  # the deletes one BatchWriteItem carries at most
# A run stops starting new pages this long before its deadline: a page's sends and deletes fit in what is left.
PAGE_MARGIN_MS = 10_000
# What SQS says of a message it will never take (beside its too-long codes): moved to the DLQ, not tried each run.
MESSAGE_REFUSALS = frozenset({"InvalidParameterValue", "InvalidMessageContents", "InvalidAttributeName",
                              "InvalidAttributeValue"})


class Released(NamedTuple):
    released: int  # sent back to their queue and gone from the room
    left: int  # due, but still in the room (SQS refused, or the run ran out of time): the next run sends them


class ScheduleWatch:
    def __init__(self, config: ScheduleWatchConfig, dynamodb: Any, sqs: Any, clock: Clock | None = None,
                 stream: TextIO | None = None) -> None:
        self._config = config
        self._dynamodb = dynamodb
        self._sqs = sqs
        self._clock = clock or SystemClock()
        self._log = JsonLog(stream, config.pipeline_name)

    def run(self, remaining_ms: Callable[[], int] = lambda: 60_000) -> Released:
        released = left = dead_lettered = 0
        lanes = [(Priority.BULK.value, self._config.queue_url, self._config.dead_letter_queue_url)]
        if self._config.urgent_queue_url:  # first: one-time codes never wait behind a campaign's release
            lanes.insert(0, (Priority.URGENT.value, self._config.urgent_queue_url,
                             self._config.urgent_dead_letter_queue_url))
        for lane, queue_url, dead_letter_queue_url in lanes:
            for page in self._due(lane, remaining_ms):
                sent, refused = self._send_back(queue_url, page)
                gone = sent + self._dead_letter(dead_letter_queue_url, queue_url, refused)
                dead_lettered += len(gone) - len(sent)  # (or sent alone at the second try)
                released += self._delete(gone)
                left += len(page) - len(gone)
        line: dict[str, Any] = {"level": "INFO", "logger": "sendonce.schedule", "released": released, "left": left,
                                "deadLettered": dead_lettered}
        if self._config.pipeline_name is not None:
            line.update(emf_values(self._config.pipeline_name, {Metric.SCHEDULED_RELEASED: (released, "Count"),
                                                                 Metric.SCHEDULED_LEFT: (left, "Count")},
                                   self._clock.now_ms()))
        self._log.emit(line)
        return Released(released, left)

    def _due(self, lane: str, remaining_ms: Callable[[], int]) -> Iterator[list[dict[str, Any]]]:
        """The lane's items due before the next two runs, a page at a time, while the run has time for a page."""
        limit = f"{self._clock.now_ms() + RELEASE_AHEAD_S * 1000:0{DUE_DIGITS}d}"
        start: dict[str, Any] | None = None
        while remaining_ms() > PAGE_MARGIN_MS:
            page = self._dynamodb.query(
                TableName=self._config.table_name, KeyConditionExpression="#room = :room AND #due < :limit",
                ExpressionAttributeNames={"#room": ROOM, "#due": DUE},
                ExpressionAttributeValues={":room": {"S": room_of(lane)}, ":limit": {"S": limit}},
                ConsistentRead=True, Limit=PAGE_ITEMS, **({"ExclusiveStartKey": start} if start else {}))
            if page.get("Items"):
                yield page["Items"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    def _send_back(self, queue_url: str, items: list[dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Each item's job sent to its queue, delayed until its due time: the items SQS took, and those it
        refused."""
        now_ms = self._clock.now_ms()
        entries: dict[str, dict[str, Any]] = {}
        for n, item in enumerate(items):
            request = json.loads(item[REQUEST]["S"])
            wait_s = math.ceil((due_ms_of(item[DUE]["S"]) - now_ms) / 1000)
            entries[str(n)] = {**request, "DelaySeconds": max(0, min(wait_s, SQS_MAX_DELAY_S))}
        answers = call_batched(self._sqs.send_message_batch, queue_url, entries)
        # Only what SQS surely took leaves the room: a send whose answer was lost may not have gone, and is sent
        # again by the next run (the ledger absorbs a second one).
        return ([items[int(n)] for n, answer in answers.items() if answer is Answer.DONE],
                [items[int(n)] for n, answer in answers.items() if answer is Answer.REFUSED])

    def _dead_letter(self, dead_letter_queue_url: str | None, queue_url: str,
                     refused: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The jobs SQS refused to take back, each tried once more alone: sent then, or, refused for what the
        message is (too long, too many attributes: it would be refused every run), moved to its lane's DLQ with
        SQS's reason, where a redrive sends it once the producer fixed it. Any other refusal (access, a key) leaves
        it in the room for the next run. The items now out of the room."""
        gone = []
        dead_letters = DeadLetterQueue(self._sqs, dead_letter_queue_url, fifo=False) if dead_letter_queue_url else None
        for item in refused:
            request = json.loads(item[REQUEST]["S"])
            said: list[Refusal] = []
            entry = {**request, "DelaySeconds": 0}
            answer = call(self._sqs.send_message, said, QueueUrl=queue_url, **entry)
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
            reason = (f"SQS refused to take it back from the waiting room at its sendAt ({refusal}), as it would "
                      "every time: make the job smaller, or give it fewer message attributes, then redrive it")
            if dead_letters.send(record, ReasonCode.INVALID_MESSAGE, reason, item[KEY]["S"]):
                gone.append(item)
        return gone

    def _delete(self, items: list[dict[str, Any]]) -> int:
        deleted = 0
        for start in range(0, len(items), DYNAMODB_MAX_BATCH_WRITES):
            chunk = items[start:start + DYNAMODB_MAX_BATCH_WRITES]
            requests = [{"DeleteRequest": {"Key": {ROOM: item[ROOM], DUE: item[DUE]}}} for item in chunk]
            for _ in range(2):  # DynamoDB's unprocessed deletes, once more; those left are sent again next run
                answer = self._dynamodb.batch_write_item(RequestItems={self._config.table_name: requests})
                requests = answer.get("UnprocessedItems", {}).get(self._config.table_name, [])
                if not requests:
                    break
            deleted += len(chunk) - len(requests)
        return deleted


def _build() -> ScheduleWatch:
    from . import aws_clients

    return ScheduleWatch(ScheduleWatchConfig.from_env(), aws_clients.recorder_client("dynamodb"),
                         aws_clients.recorder_client("sqs"))


_watch = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, int]:
    return _watch.get().run(context.get_remaining_time_in_millis)._asdict()
