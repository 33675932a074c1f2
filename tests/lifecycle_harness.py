"""The machinery of the lifecycle property test (``test_lifecycle.py``), every piece on the test's fake clock.

- :class:`JobQueue`: SQS's time played over the emulator's real job queue. The real queue holds the messages, counts
  their receives, hands out the receipt handles and moves a message to its DLQ at ``maxReceiveCount``; what makes a
  message wait (a copy's ``DelaySeconds``, a visibility change, the visibility timeout after a receive) is kept here
  as a due time on the fake clock while the real call waits for nothing. A message the model says is out of sight
  stays out of sight in the real queue too (a long real visibility timeout), and is made visible and received again
  when it is due, so every receive count and receipt handle is the one SQS would give. It also plays what the
  emulator does not: the queue's retention (a message older than it is deleted), a FIFO queue's five-minute
  deduplication window, and a delete by a receipt handle older than the message's latest, which SQS answers as done
  without deleting. (The maximum message size, attributes counted, is the emulator's own: its patches play it.)
- :class:`CallFaults`: a consumer invocation killed after any of its AWS calls took effect (or before the first),
  the answer of one call lost after the call took effect (or its request before it could), or one call answering so
  late on the fake clock that the invocation reaches its deadline and Lambda kills it.
- :class:`SesEvents`: SES's event publishing (the records ``sendonce_local.emulator.ses_publisher`` builds from the
  emulator's log of accepted sends, each accepted at the fake time of the invocation that sent it) handed to the
  real recorder on the fake clock: in time, late, twice, out of order or never, as each email's :class:`Weather`
  says.
- :func:`modules_on_clock`: the producer's and the operator's modules read the fake clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import importlib
import io
import itertools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, ReadTimeoutError
from crash_injection import WorkerKilled

from sendonce_contract.schema import DeadLetter
from sendonce_contract.sqs_limits import message_bytes
from sendonce_local.emulator.ses_publisher import (
    SEND_LOG,
    AcceptedSend,
    as_sqs_records,
    eventbridge_event,
    ses_event_records,
)
from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record

# A message the model holds out of sight stays out of sight this long in real time: far longer than a test runs,
# and short enough for SQS's 12-hour limit on a message's visibility.
REAL_HIDE_S = 3_600
FIFO_DEDUPLICATION_MS = 300_000  # SQS drops a FIFO message whose deduplication id it took this recently
SQS_BATCH = 10
REGION = "us-east-1"
# The SQS calls a JobQueue may answer itself (without a real call).
SQS_ANSWERED_BY_THE_MODEL = ("SendMessage", "SendMessageBatch", "DeleteMessage", "DeleteMessageBatch",
                             "ReceiveMessage")
# What a hook leaves in botocore's request context for the hooks after it.
_SEND, _VISIBILITY, _DELETE, _RECEIVE = "lifecycle.send", "lifecycle.visibility", "lifecycle.delete", "lifecycle.rcv"


class Gone(enum.StrEnum):
    DELETED = "deleted"
    EXPIRED = "deleted by the queue's retention"
    MOVED = "moved to the DLQ by SQS (maxReceiveCount)"


@dataclass
class QueuedMessage:
    """One message of the job queue, as the model sees it."""

    message_id: str
    body: str
    key: str | None  # the job's dedupe key, read from the body
    sent_ms: int  # SQS's SentTimestamp, on the fake clock
    due_ms: int  # when it is (next) visible, on the fake clock
    origin: str  # who sent it: "producer", "consumer", "operator", ...
    handle: str | None = None  # its latest real receipt handle
    held: dict[str, Any] | None = None  # its latest real receive, not handed to the consumer yet
    visible_in_real: bool = True  # not received since it was sent, or made visible again because it was due
    gone: Gone | None = None
    receive_count: int = 0
    received_order: int = 0  # when it was last received, so a FIFO group keeps its order
    outcomes: list[str] = field(default_factory=list)  # what each delivery of it ended in


@dataclass(frozen=True)
class DeadLetterSent:
    """A message someone sent to the DLQ (the consumer, with its reason attributes)."""

    message_id: str
    sent_ms: int
    key: str | None
    reason_code: str
    reason: str
    source_message_id: str | None


@dataclass
class _SendPlan:
    url: str
    batch: bool
    entries: dict[str, dict[str, Any]]  # by entry id ("-" for SendMessage): what the caller asked, unchanged
    delays_s: dict[str, int] = field(default_factory=dict)
    deduplication_ids: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # entry id -> SQS's reason
    duplicates: set[str] = field(default_factory=set)
    nothing_left: bool = False


def _reply(status: int, parsed: dict[str, Any]) -> tuple[AWSResponse, dict[str, Any]]:
    parsed.setdefault("ResponseMetadata", {})["HTTPStatusCode"] = status
    return AWSResponse(None, status, {}, None), parsed


def _key_of(body: str) -> str | None:
    try:
        key = json.loads(body).get("dedupeKey")
    except (ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None


def _entries(params: Mapping[str, Any]) -> tuple[bool, list[dict[str, Any]]]:
    """Whether ``params`` are a batch request's, and its entries (a single request is its own entry, id "-")."""
    if "Entries" in params:
        return True, list(params["Entries"])
    return False, [params]  # type: ignore[list-item]


def _entry_id(entry: Mapping[str, Any]) -> str:
    return str(entry.get("Id", "-"))


class JobQueue:
    """The job queue on the fake clock; see the module's docstring. ``watch`` a client to have its calls played."""

    def __init__(self, sqs: Any, *, fifo: bool, visibility_timeout_s: int, retention_s: int,
                 max_message_bytes: int) -> None:
        self._sqs = sqs  # the event source's own client: never watched, never faulted
        self.fifo = fifo
        self.visibility_timeout_s = visibility_timeout_s
        self.retention_ms = retention_s * 1000
        self.max_message_bytes = max_message_bytes
        self._lock = threading.RLock()  # a batch's records run on several threads
        self.start("", "", "", None)

    def start(self, queue_url: str, queue_arn: str, dead_letter_queue_url: str, clock: Any) -> None:
        """Play a new queue (and its DLQ) on ``clock``, forgetting the last one."""
        with self._lock:
            self.queue_url = queue_url
            self.dead_letter_queue_url = dead_letter_queue_url
            self._clock = clock
            self._source = EventSourceSpec(queue_url, queue_arn)
            self.messages: dict[str, QueuedMessage] = {}
            self._by_handle: dict[str, QueuedMessage] = {}
            self._deduplicated: dict[str, int] = {}  # FIFO deduplication id -> when SQS took it
            self._unique = itertools.count(1)
            self._received = itertools.count(1)
            self.dead_letters: list[DeadLetterSent] = []
            self.dead_letter_sent_ms: dict[str, int] = {}  # DLQ message id -> when it was sent there

    # -- the calls of watched clients ----------------------------------------------------------------------------

    def watch(self, client: Any, origin: str) -> Any:
        """Play ``client``'s SQS calls on the fake clock; returns it."""
        events = client.meta.events
        for operation in ("SendMessage", "SendMessageBatch"):
            events.register(f"before-parameter-build.sqs.{operation}", self._before_send)
            events.register(f"before-call.sqs.{operation}", self._send_reply)
            events.register(f"after-call.sqs.{operation}", functools.partial(self._after_send, origin=origin))
        for operation in ("ChangeMessageVisibility", "ChangeMessageVisibilityBatch"):
            events.register(f"before-parameter-build.sqs.{operation}", self._before_visibility)
            events.register(f"after-call.sqs.{operation}", self._after_visibility)
        for operation in ("DeleteMessage", "DeleteMessageBatch"):
            events.register(f"before-parameter-build.sqs.{operation}", self._before_delete)
            events.register(f"before-call.sqs.{operation}", self._delete_reply)
            events.register(f"after-call.sqs.{operation}", self._after_delete)
        events.register("before-parameter-build.sqs.ReceiveMessage", self._before_receive)
        events.register("after-call.sqs.ReceiveMessage", self._dead_letters_on_fake_time)
        return client

    def _before_send(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        url = params.get("QueueUrl")
        batch, entries = _entries(params)
        if url == self.dead_letter_queue_url:
            context[_SEND] = _SendPlan(url, batch, {_entry_id(e): dict(e) for e in entries})
            return
        if url != self.queue_url:
            return
        plan = _SendPlan(url, batch, {_entry_id(e): dict(e) for e in entries})
        kept = []
        with self._lock:
            now = self._clock.now_ms()
            taken_here: set[str] = set()
            for entry in entries:
                entry_id = _entry_id(entry)
                if message_bytes(entry) > self.max_message_bytes:  # SQS counts the attributes too; moto does not
                    plan.refused[entry_id] = ("One or more parameters are invalid. Reason: Message must be shorter "
                                              f"than {self.max_message_bytes} bytes.")
                    continue
                if self.fifo:
                    deduplication_id = str(entry.get("MessageDeduplicationId", ""))
                    taken_at = self._deduplicated.get(deduplication_id)
                    if deduplication_id in taken_here or (taken_at is not None
                                                          and now - taken_at < FIFO_DEDUPLICATION_MS):
                        plan.duplicates.add(entry_id)  # SQS answers that it took it, and drops it
                        continue
                    taken_here.add(deduplication_id)
                    plan.deduplication_ids[entry_id] = deduplication_id
                    # moto's window is real time and forgets deleted messages: the model is the window.
                    entry["MessageDeduplicationId"] = f"{deduplication_id[:100]}.{next(self._unique)}"
                else:
                    plan.delays_s[entry_id] = int(entry.get("DelaySeconds") or 0)
                    entry["DelaySeconds"] = 0
                kept.append(entry)
        if batch:
            params["Entries"] = kept
        plan.nothing_left = not kept
        context[_SEND] = plan

    def _send_reply(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        """What SQS answers for a send the model refuses or drops as a FIFO duplicate (no real call is made)."""
        plan: _SendPlan | None = context.get(_SEND)
        if plan is None or plan.url != self.queue_url or not plan.nothing_left:
            return None
        if not plan.batch and plan.refused:
            return _reply(400, {"Error": {"Code": "InvalidParameterValue", "Message": plan.refused["-"],
                                          "Type": "Sender"}})
        if not plan.batch:
            return _reply(200, {"MessageId": str(uuid.uuid4())})
        return _reply(200, {"Successful": [], "Failed": []})  # the entries are answered after the call

    def _after_send(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], origin: str,
                    **_: Any) -> None:
        plan: _SendPlan | None = context.get(_SEND)
        if plan is None or http_response.status_code >= 300:
            return
        if plan.batch:
            sent = {item["Id"]: item["MessageId"] for item in parsed.get("Successful", [])}
        elif plan.refused or plan.duplicates:
            sent = {}
        else:
            sent = {"-": parsed["MessageId"]}
        with self._lock:
            now = self._clock.now_ms()
            if plan.url == self.dead_letter_queue_url:
                for entry_id, message_id in sent.items():
                    self._dead_lettered(message_id, plan.entries[entry_id], now)
                return
            for entry_id, message_id in sent.items():
                if entry_id in plan.duplicates or entry_id in plan.refused:
                    continue
                entry = plan.entries[entry_id]
                delay_ms = plan.delays_s.get(entry_id, 0) * 1000
                self.messages[message_id] = QueuedMessage(message_id, entry["MessageBody"], _key_of(
                    entry["MessageBody"]), now, now + delay_ms, origin)
                if entry_id in plan.deduplication_ids:
                    self._deduplicated[plan.deduplication_ids[entry_id]] = now
        if plan.batch:
            parsed.setdefault("Successful", []).extend(
                {"Id": entry_id, "MessageId": str(uuid.uuid4()), "MD5OfMessageBody": ""}
                for entry_id in sorted(plan.duplicates))
            parsed.setdefault("Failed", []).extend(
                {"Id": entry_id, "SenderFault": True, "Code": "InvalidParameterValue", "Message": reason}
                for entry_id, reason in sorted(plan.refused.items()))

    def _dead_lettered(self, message_id: str, entry: Mapping[str, Any], now: int) -> None:
        attributes = {name: value.get("StringValue", "") for name, value in
                      (entry.get("MessageAttributes") or {}).items()}
        self.dead_letter_sent_ms[message_id] = now
        self.dead_letters.append(DeadLetterSent(
            message_id, now, attributes.get(DeadLetter.DEDUPE_KEY) or _key_of(entry.get("MessageBody", "")),
            attributes.get(DeadLetter.REASON_CODE, ""), attributes.get(DeadLetter.REASON, ""),
            attributes.get(DeadLetter.SOURCE_MESSAGE_ID)))

    def _before_visibility(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") != self.queue_url:
            return
        _, entries = _entries(params)
        context[_VISIBILITY] = {_entry_id(e): (e["ReceiptHandle"], int(e["VisibilityTimeout"])) for e in entries}
        for entry in entries:
            entry["VisibilityTimeout"] = REAL_HIDE_S  # out of sight in real time; due on the fake clock

    def _after_visibility(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any],
                          **_: Any) -> None:
        asked: dict[str, tuple[str, int]] | None = context.get(_VISIBILITY)
        if asked is None or http_response.status_code >= 300:
            return
        done = [item["Id"] for item in parsed.get("Successful", [])] if "-" not in asked else ["-"]
        with self._lock:
            now = self._clock.now_ms()
            for entry_id in done:
                handle, seconds = asked[entry_id]
                message = self._by_handle.get(handle)
                if message is not None and message.gone is None:
                    message.due_ms = now + seconds * 1000
                    message.visible_in_real = False

    def _before_delete(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if params.get("QueueUrl") != self.queue_url:
            return
        batch, entries = _entries(params)
        stale, kept = set(), []
        with self._lock:
            for entry in entries:
                message = self._by_handle.get(entry["ReceiptHandle"])
                if message is not None and message.gone is None and message.handle != entry["ReceiptHandle"]:
                    stale.add(_entry_id(entry))  # received again since: SQS says done and deletes nothing
                else:
                    kept.append(entry)
        if batch:
            params["Entries"] = kept
        context[_DELETE] = ({_entry_id(e): e["ReceiptHandle"] for e in entries}, stale, not kept)

    def _delete_reply(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        asked = context.get(_DELETE)
        if asked is None or not asked[2]:
            return None
        return _reply(200, {"Successful": [], "Failed": []} if "-" not in asked[0] else {})

    def _after_delete(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        asked = context.get(_DELETE)
        if asked is None or http_response.status_code >= 300:
            return
        handles, stale, _ = asked
        done = ["-"] if "-" in handles else [item["Id"] for item in parsed.get("Successful", [])]
        with self._lock:
            for entry_id in done:
                if entry_id not in stale:
                    self._deleted(handles[entry_id])
        if "-" not in handles:
            parsed.setdefault("Successful", []).extend({"Id": entry_id} for entry_id in sorted(stale))

    def _deleted(self, handle: str) -> None:
        message = self._by_handle.get(handle)
        if message is not None and message.gone is None:
            message.gone = Gone.DELETED
            message.held = None

    def _before_receive(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_RECEIVE] = dict(params)

    def _dead_letters_on_fake_time(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        """The DLQ's messages read with their SentTimestamp on the fake clock (a redrive skips old ones by it)."""
        params = context.get(_RECEIVE) or {}
        if params.get("QueueUrl") != self.dead_letter_queue_url:
            return
        for message in parsed.get("Messages", []):
            sent_ms = self.sent_ms_of(message["MessageId"])
            if sent_ms is not None:
                message.setdefault("Attributes", {})["SentTimestamp"] = str(sent_ms)

    def sent_ms_of(self, message_id: str) -> int | None:
        """When ``message_id`` was sent, on the fake clock: a dead letter's, or a job's (SQS keeps it when it moves
        a message to the DLQ)."""
        if message_id in self.dead_letter_sent_ms:
            return self.dead_letter_sent_ms[message_id]
        message = self.messages.get(message_id)
        return None if message is None else message.sent_ms

    # -- the event source --------------------------------------------------------------------------------------------

    def live(self) -> list[QueuedMessage]:
        return [m for m in self.messages.values() if m.gone is None]

    def settle(self) -> None:
        """Bring the real queue in line with the fake clock: receive what was sent, delete what retention ended,
        make visible (and receive) what is due."""
        with self._lock:
            now = self._clock.now_ms()
            self._pull()
            self._expire(now)
            revealed = self._reveal(now)
            self._pull()
            if not self.fifo:  # a due message a standard queue did not hand out was moved to the DLQ on that receive
                for message in revealed:
                    if message.held is None and message.gone is None and message.visible_in_real:
                        message.gone = Gone.MOVED

    def _pull(self) -> None:
        while True:
            got = self._sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=SQS_BATCH, VisibilityTimeout=REAL_HIDE_S,
                WaitTimeSeconds=0, MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not got:
                return
            for entry in got:
                message = self.messages.get(entry["MessageId"])
                if message is None:  # sent by a client the model does not watch: due now
                    now = self._clock.now_ms()
                    message = QueuedMessage(entry["MessageId"], entry["Body"], _key_of(entry["Body"]), now, now,
                                            "unwatched")
                    self.messages[message.message_id] = message
                message.handle = entry["ReceiptHandle"]
                self._by_handle[message.handle] = message
                message.receive_count = int(entry.get("Attributes", {}).get("ApproximateReceiveCount", "1"))
                message.visible_in_real = False
                if message.gone is Gone.EXPIRED:  # its retention ended while its group held it back
                    self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.handle)
                    continue
                message.held = entry
                message.received_order = next(self._received)

    def _expire(self, now: int) -> None:
        for message in self.live():
            if now - message.sent_ms >= self.retention_ms:
                message.gone = Gone.EXPIRED
                message.held = None
                if message.handle is None:
                    continue
                try:
                    self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.handle)
                except ClientError as error:
                    if error.response.get("Error", {}).get("Code") != "ReceiptHandleIsInvalid":
                        raise
                    message.gone = Gone.MOVED  # no longer queued: SQS moved it while its FIFO group held it back

    def _reveal(self, now: int) -> list[QueuedMessage]:
        due = [m for m in self.live()
               if m.held is None and not m.visible_in_real and m.handle is not None and m.due_ms <= now]
        for start in range(0, len(due), SQS_BATCH):
            chunk = due[start:start + SQS_BATCH]
            answer = self._sqs.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(n), "ReceiptHandle": m.handle, "VisibilityTimeout": 0} for n, m in enumerate(chunk)])
            for item in answer.get("Successful", []):
                chunk[int(item["Id"])].visible_in_real = True
        return [m for m in due if m.visible_in_real]

    def _due(self, now: int) -> list[QueuedMessage]:
        ready = [m for m in self.live() if m.held is not None and m.due_ms <= now]
        if self.fifo:
            return sorted(ready, key=lambda m: m.received_order)
        return sorted(ready, key=lambda m: (m.due_ms, m.received_order))

    def _hand_over(self, message: QueuedMessage, visibility_s: int, how: str) -> dict[str, Any]:
        entry = message.held
        assert entry is not None
        message.held = None
        message.due_ms = self._clock.now_ms() + visibility_s * 1000
        message.outcomes.append(how)  # replaced by what the delivery ended in, once known
        entry = {**entry, "Attributes": {**entry.get("Attributes", {}), "SentTimestamp": str(message.sent_ms)}}
        return entry

    def next_batch(self, size: int, behind_ms: int = 0) -> list[QueuedMessage]:
        """The messages Lambda's event source would hand over now, at most ``size``; ``behind_ms``: it is that far
        behind (a backlog), so only what was due that long ago."""
        with self._lock:
            self.settle()
            return self._due(self._clock.now_ms() - behind_ms)[:size]

    def hand_over(self, messages: Sequence[QueuedMessage]) -> list[dict[str, Any]]:
        """``messages`` as the records of one invocation; each is out of sight for the queue's visibility timeout."""
        with self._lock:
            entries = [self._hand_over(m, self.visibility_timeout_s, "handed over") for m in messages]
        return [lambda_record(entry, self._source, REGION) for entry in entries]

    def acknowledge(self, messages: Sequence[QueuedMessage], failed: set[str]) -> None:
        """What Lambda does with a batch response: delete every message but the failures."""
        done = [m for m in messages if m.message_id not in failed and m.gone is None and m.handle is not None]
        for start in range(0, len(done), SQS_BATCH):
            chunk = done[start:start + SQS_BATCH]
            answer = self._sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(n), "ReceiptHandle": m.handle} for n, m in enumerate(chunk)])
            with self._lock:
                for item in answer.get("Successful", []):
                    self._deleted(str(chunk[int(item["Id"])].handle))

    def next_due_ms(self, after_ms: int) -> int | None:
        """When the next message after ``after_ms`` is due (retention's deletes are made as the queue settles). A
        message visible but held back by its FIFO group waits for that group, not for a time."""
        with self._lock:
            later = [m.due_ms for m in self.live() if m.due_ms > after_ms
                     and (m.held is not None or not m.visible_in_real or m.handle is None)]
        return min(later) if later else None


# -- kills, lost answers and slow answers ------------------------------------------------------------------------


@dataclass(frozen=True)
class InvocationFaults:
    """What goes wrong in one invocation, counted in its AWS calls (each answered or not)."""

    kill_after_call: int | None = None  # killed once this many calls took effect (0: before the first)
    lose_answer_of_call: int | None = None  # this call takes effect, and its answer is lost (a read timeout)
    lose_request_of_call: int | None = None  # this call never reaches the service, and times out the same way
    slow_call: int | None = None  # this call answers ``slow_ms`` late on the fake clock
    slow_ms: int = 0

    @property
    def none(self) -> bool:
        return self == InvocationFaults()


class CallFaults:
    """Plays :class:`InvocationFaults` on the clients ``watch`` was given (the consumer's): a kill raises
    :class:`WorkerKilled` in the call that meets it and in every call after it, as a dead process makes none."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.start(None)

    def start(self, clock: Any) -> None:
        """Faults on ``clock`` from now on, none armed."""
        with self._lock:
            self._clock = clock
            self._faults = InvocationFaults()
            self._deadline_ms: int | None = None
            self.calls = 0
            self.dead = False
            self.happened: list[str] = []  # what the faults did, for the step's report

    def watch(self, client: Any) -> Any:
        service = client.meta.service_model.service_id.hyphenize()
        events = client.meta.events
        # Every call of the service: a kill checked before it, counted (and maybe faulted) after the hooks that
        # record what it did, so a call whose answer is lost took effect first.
        events.register_first(f"before-call.{service}", self._before)
        events.register_last(f"after-call.{service}", self._after)
        events.register_last(f"after-call-error.{service}", self._after_error)
        # The calls the queue's model may answer itself run its hooks first: a dead worker's is refused before.
        for operation in SQS_ANSWERED_BY_THE_MODEL if service == "sqs" else ():
            events.register_first(f"before-call.{service}.{operation}", self._before)
        return client

    def arm(self, faults: InvocationFaults, deadline_ms: int) -> None:
        with self._lock:
            self._faults, self._deadline_ms = faults, deadline_ms
            self.calls, self.dead, self.happened = 0, False, []

    def disarm(self) -> None:
        with self._lock:
            self._faults, self._deadline_ms = InvocationFaults(), None

    def _before(self, event_name: str, **_: Any) -> None:
        operation = event_name.rpartition(".")[2]
        with self._lock:
            if not self.dead and self._faults.kill_after_call == 0 and self.calls == 0:
                self.dead = True
                self.happened.append(f"killed before its first AWS call ({operation})")
            if self.dead:
                raise WorkerKilled(operation)
            if self._faults.lose_request_of_call == self.calls + 1:
                self.calls += 1
                self.happened.append(f"call {self.calls} ({operation}) lost on the way: not carried out")
                raise ReadTimeoutError(endpoint_url=f"{operation} (request lost)")

    def _after(self, event_name: str, **_: Any) -> None:
        self._count(event_name.rpartition(".")[2], answered=True)

    def _after_error(self, event_name: str, **_: Any) -> None:
        self._count(event_name.rpartition(".")[2], answered=False)

    def _count(self, operation: str, answered: bool) -> None:
        with self._lock:
            if self.dead:  # the process died while this call was on the wire
                raise WorkerKilled(operation)
            self.calls += 1
            n, faults = self.calls, self._faults
            if faults.slow_call == n:
                self._clock.advance(faults.slow_ms)
                self.happened.append(f"call {n} ({operation}) answered {faults.slow_ms} ms late")
                if self._deadline_ms is not None and self._clock.now_ms() >= self._deadline_ms:
                    self.dead = True
                    self.happened.append("killed at its deadline")
                    raise WorkerKilled(f"deadline at {operation}")
            if faults.kill_after_call == n:
                self.dead = True
                self.happened.append(f"killed after call {n} ({operation})")
                raise WorkerKilled(operation)
            if faults.lose_answer_of_call == n and answered:
                self.happened.append(f"the answer of call {n} ({operation}) lost")
                raise ReadTimeoutError(endpoint_url=f"{operation} (answer lost)")


# -- SES's events ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Weather:
    """When each of an email's events reaches the recorder, after SES accepted it: one time per copy of the event
    (none: never; two: delivered twice)."""

    name: str
    send_ms: tuple[int, ...]  # the Send event
    outcome_ms: tuple[int, ...]  # the recipient's outcome (Delivery)


@dataclass
class Email:
    """One email the emulator's SES accepted, as the test saw it."""

    ses_message_id: str
    key: str
    accepted_ms: int  # on the fake clock (the end of the invocation that sent it)
    order: int  # its place among every step's happenings
    weather: str
    verdicts: list[str] = field(default_factory=list)  # what the recorder made of each of its events


class SesEvents:
    """The emulator's accepted sends, their events scheduled by the weather and handed to ``recorder`` (an
    ``EventRecorder``) on the fake clock; an event the recorder fails comes back a second later."""

    def __init__(self, recorder: Any, recorder_log: io.StringIO, clock: Any, account: str) -> None:
        self._recorder = recorder
        self._log = recorder_log
        self._read = 0
        self._clock = clock
        self._account = account
        self._seen = len(SEND_LOG.since(0))
        self._due: list[tuple[int, int, dict[str, Any], str]] = []
        self._order = itertools.count()
        self.emails: dict[str, Email] = {}
        self.doubles_reported: set[str] = set()  # keys DoubleSends was counted for (by the recorder; the test adds
        # the consumer's, from its log)

    def take_new_sends(self, weather: Weather, order: int, key_of: Callable[[AcceptedSend], str | None]
                       ) -> list[Email]:
        """The emails SES accepted since the last call, each with its events scheduled by ``weather``."""
        sends = SEND_LOG.since(self._seen)
        self._seen += len(sends)
        now = self._clock.now_ms()
        found = []
        for send in sends:
            key = key_of(send)
            if key is None:
                continue
            # SES accepted it on the fake clock (the emulator stamps the wall clock's time): the recorder compares
            # it with the claim's time, on the same clock.
            send = dataclasses.replace(send, accepted_at=now / 1000)
            email = Email(send.ses_message_id, key, now, order, weather.name)
            self.emails[email.ses_message_id] = email
            found.append(email)
            for record in ses_event_records(send, self._account, REGION):
                offsets = weather.send_ms if record["eventType"] == "Send" else weather.outcome_ms
                for offset in offsets:
                    self._due.append((now + offset, next(self._order), eventbridge_event(record, self._account,
                                                                                         REGION), send.ses_message_id))
        return found

    def next_due_ms(self, after_ms: int) -> int | None:
        later = [due for due, *_ in self._due if due > after_ms]
        return min(later) if later else None

    def pending(self) -> int:
        return len(self._due)

    def deliver_due(self) -> int:
        """Hand the recorder every event due; how many."""
        now = self._clock.now_ms()
        ready = sorted((item for item in self._due if item[0] <= now), key=lambda item: item[:2])
        self._due = [item for item in self._due if item[0] > now]
        for start in range(0, len(ready), SQS_BATCH):
            chunk = ready[start:start + SQS_BATCH]
            records = as_sqs_records([item[2] for item in chunk])
            response = self._recorder.handle({"Records": records})
            failed = {item["itemIdentifier"] for item in response.get("batchItemFailures", [])}
            for record, item in zip(records, chunk, strict=True):
                if record["messageId"] in failed:  # the event source brings it back
                    self._due.append((now + 1_000, next(self._order), item[2], item[3]))
            self._read_log()
        return len(ready)

    def _read_log(self) -> None:
        lines = self._log.getvalue().splitlines()
        for line in lines[self._read:]:
            entry = json.loads(line)
            email = self.emails.get(str(entry.get("sesMessageId")))
            if email is not None:
                email.verdicts.append(str(entry.get("outcome")))
            if entry.get("DoubleSends") == 1 and entry.get("dedupeKey"):
                self.doubles_reported.add(str(entry["dedupeKey"]))
        self._read = len(lines)


# -- the wall clock of the producer's and the operator's modules -------------------------------------------------


class ClockAsTimeModule:
    """Stands in for the ``time`` module where a module reads the wall clock: ``time``, ``time_ns`` read the fake
    clock; the rest is the real module's."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def time(self) -> float:
        return float(self._clock.now_ms() / 1000)

    def time_ns(self) -> int:
        return int(self._clock.now_ms()) * 1_000_000

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


# The modules whose wall clock a cancel, an operator's command or a redrive reads.
CLOCKED_MODULES = ("sendonce_producer.cancel", "sendonce_ops.cli", "sendonce_ops.ledger_view",
                   "sendonce_ops.dead_letters")


@contextlib.contextmanager
def modules_on_clock(clock: Any, modules: Sequence[str] = CLOCKED_MODULES) -> Iterator[None]:
    """Within the block, each of ``modules`` that reads ``time`` reads ``clock`` instead."""
    saved = []
    for name in modules:
        module = importlib.import_module(name)
        if getattr(module, "time", None) is time:
            saved.append(module)
            module.time = ClockAsTimeModule(clock)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module in saved:
            module.time = time  # type: ignore[attr-defined]

