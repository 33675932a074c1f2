"""Reads the DLQ by reason and sends messages back to the job queue, never deleting before the copy is in."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.priority import Priority, priority_of, queue_for
from sendonce_contract.schema import GUARD_HOLDS, CopyAttribute, DeadLetter, ReasonCode

PEEK_VISIBILITY_S = 30
BATCH = 10


@dataclass
class ReasonGroup:
    code: str
    count: int = 0
    sample_reason: str = ""
    sample_keys: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ForgottenJob:
    """A dead letter older than dedupe_ttl: a record of its key written before it was dead-lettered has expired, so
    a redrive could send it again."""

    message_id: str
    dedupe_key: str | None
    reason_code: str
    age_days: float


@dataclass
class RedriveResult:
    moved: int = 0
    skipped: int = 0
    native_task: str | None = None  # the SQS message-move task handle, when the whole DLQ moved natively
    note: str | None = None
    forgotten: list[ForgottenJob] = field(default_factory=list)  # skipped: past dedupe_ttl (without force)


class DedupeTtlUnknown(ValueError):
    """A safe redrive needs the pipeline's dedupe_ttl."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def forgotten(message: dict[str, Any], dedupe_ttl_s: int, now_ms: int) -> ForgottenJob | None:
    """The message as a :class:`ForgottenJob` when it has been in the DLQ longer than ``dedupe_ttl_s``. Its age
    counts from SQS's ``SentTimestamp``: when the consumer dead-lettered it, or, for a job SQS moved itself, when
    it was first enqueued (SQS keeps that time across a redrive)."""
    sent_ms = int(message.get("Attributes", {}).get("SentTimestamp", now_ms))
    age_ms = now_ms - sent_ms
    if age_ms <= dedupe_ttl_s * 1000:
        return None
    attributes = message.get("MessageAttributes", {})
    return ForgottenJob(message["MessageId"], attributes.get(DeadLetter.DEDUPE_KEY, {}).get("StringValue"),
                        reason_code(message), round(age_ms / 86_400_000, 2))


def dedupe_key_of(message: dict[str, Any]) -> str | None:
    """The key the consumer attached to a dead letter (the record's key: the digest under key_privacy)."""
    value: str | None = message.get("MessageAttributes", {}).get(DeadLetter.DEDUPE_KEY, {}).get("StringValue")
    return value


def reason_code(message: dict[str, Any]) -> str:
    return str(message.get("MessageAttributes", {}).get(DeadLetter.REASON_CODE, {})
               .get("StringValue", ReasonCode.REDRIVEN_BY_SQS.value))


class DeadLetters:
    """One lane's dead-letter queue (``lane``: the job queue's, or the urgent lane's with ``urgent_queue_url``).
    A redriven job goes back to the queue of its own ``priority``; SQS's message-move task, which cannot route,
    moves a whole DLQ back to its lane's queue."""

    def __init__(self, sqs: Any, dlq_url: str, queue_url: str | None = None, urgent_queue_url: str | None = None,
                 lane: Priority = Priority.BULK) -> None:
        self._sqs = sqs
        self._dlq = dlq_url
        self._queue = queue_url
        self._urgent_queue = urgent_queue_url
        self._lane = lane

    def _queue_of(self, body: str) -> str:
        assert self._queue is not None
        return queue_for(priority_of(body), self._queue, self._urgent_queue)

    def _receive_all(self, on_page: Callable[[int], None] | None, limit: int | None = None) -> list[dict[str, Any]]:
        """Every message once: each stays hidden while the scan runs, so none is read twice."""
        seen: dict[str, dict[str, Any]] = {}
        while limit is None or len(seen) < limit:
            page = self._sqs.receive_message(
                QueueUrl=self._dlq, MaxNumberOfMessages=BATCH, VisibilityTimeout=PEEK_VISIBILITY_S,
                MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in page if m["MessageId"] not in seen]
            if not fresh:
                break
            seen.update((m["MessageId"], m) for m in fresh)
            if on_page is not None:
                on_page(len(seen))
        return list(seen.values())

    def _release(self, messages: list[dict[str, Any]]) -> None:
        """Make peeked messages visible again at once."""
        for start in range(0, len(messages), BATCH):
            chunk = messages[start : start + BATCH]
            self._sqs.change_message_visibility_batch(QueueUrl=self._dlq, Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(chunk)
            ])

    def by_reason(self, on_page: Callable[[int], None] | None = None) -> list[ReasonGroup]:
        messages = self._receive_all(on_page)
        try:
            groups: dict[str, ReasonGroup] = {}
            for message in messages:
                code = reason_code(message)
                group = groups.setdefault(code, ReasonGroup(code))
                group.count += 1
                attributes = message.get("MessageAttributes", {})
                if not group.sample_reason:
                    group.sample_reason = attributes.get(DeadLetter.REASON, {}).get("StringValue", "")
                key = dedupe_key_of(message)
                if key and len(group.sample_keys) < 3:
                    group.sample_keys.append(key)
            return sorted(groups.values(), key=lambda g: -g.count)
        finally:
            self._release(messages)

    def holding(self, key: str) -> list[tuple[str, str]]:
        """The (reason code, reason) of each dead letter of ``key``; every message is left as it was."""
        messages = self._receive_all(None)
        try:
            return [(reason_code(m), m.get("MessageAttributes", {}).get(DeadLetter.REASON, {}).get("StringValue", ""))
                    for m in messages if dedupe_key_of(m) == key]
        finally:
            self._release(messages)

    def redrive(
        self,
        reason: str | None = None,
        limit: int | None = None,
        on_progress: Callable[[int], None] | None = None,
        after_copy: Callable[[dict[str, Any]], None] | None = None,
        dedupe_ttl_s: int | None = None,
        force: bool = False,
        key: str | None = None,
    ) -> RedriveResult:
        """Send DLQ messages back to the job queue: those with ``reason`` and ``key`` (the record's key; up to
        ``limit``) by copy-then-delete,
        skipping (and listing) those in the DLQ longer than ``dedupe_ttl_s``, whose key may be forgotten; with
        ``force``, all of them, through SQS's message-move task when no filter is given. ``after_copy`` runs between
        a copy and its delete."""
        if self._queue is None:
            raise ValueError("redrive needs the job queue: pass --queue or --stack")
        if not force:
            if dedupe_ttl_s is None:
                raise DedupeTtlUnknown(
                    "redrive skips jobs whose key the ledger may have forgotten, and needs the pipeline's "
                    "dedupe_ttl for it: pass --stack or --dedupe-ttl SECONDS, or --force to redrive them all")
            return self._copy_then_delete(reason, limit, on_progress, after_copy, dedupe_ttl_s, key)
        if reason is None and limit is None and key is None:
            native = self._native_move()
            if native.native_task is not None:
                return native
            result = self._copy_then_delete(None, None, on_progress, after_copy)
            result.note = native.note
            return result
        return self._copy_then_delete(reason, limit, on_progress, after_copy, key=key)

    def _native_move(self) -> RedriveResult:
        attributes = ["QueueArn"]
        source = self._sqs.get_queue_attributes(QueueUrl=self._dlq, AttributeNames=attributes)["Attributes"]
        assert self._queue is not None
        home = queue_for(self._lane, self._queue, self._urgent_queue)
        target = self._sqs.get_queue_attributes(QueueUrl=home, AttributeNames=attributes)["Attributes"]
        try:
            task = self._sqs.start_message_move_task(SourceArn=source["QueueArn"], DestinationArn=target["QueueArn"])
        except ClientError as error:
            code = error.response["Error"].get("Code", "")
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            if status >= 500 or code in ("InvalidAction", "NotImplemented", "UnsupportedOperation"):
                return RedriveResult(note=f"this endpoint has no message-move task ({code}); copied and deleted "
                                          "each message instead")
            raise
        return RedriveResult(native_task=task["TaskHandle"])

    def _copy_then_delete(
        self,
        reason: str | None,
        limit: int | None,
        on_progress: Callable[[int], None] | None,
        after_copy: Callable[[dict[str, Any]], None] | None,
        dedupe_ttl_s: int | None = None,
        key: str | None = None,
    ) -> RedriveResult:
        result = RedriveResult()
        fifo = self._dlq.endswith(".fifo")
        messages = self._receive_all(None)
        passed_over = []
        now_ms = _now_ms()
        for message in messages:
            if ((reason is not None and reason_code(message) != reason)
                    or (key is not None and dedupe_key_of(message) != key)
                    or (limit is not None and result.moved >= limit)):
                passed_over.append(message)
                continue
            old = forgotten(message, dedupe_ttl_s, now_ms) if dedupe_ttl_s is not None else None
            if old is not None:
                result.forgotten.append(old)
                passed_over.append(message)
                continue
            self._sqs.send_message(**_copy_of(message, self._queue_of(message["Body"]), fifo))
            if after_copy is not None:
                after_copy(message)
            self._sqs.delete_message(QueueUrl=self._dlq, ReceiptHandle=message["ReceiptHandle"])
            result.moved += 1
            if on_progress is not None:
                on_progress(result.moved)
        result.skipped = len(passed_over)
        self._release(passed_over)
        return result


# Ours, kept on the job a redrive sends back: a lane's age limit counts from the job's first queueing.
KEPT_BY_A_REDRIVE = frozenset({DeadLetter.FIRST_QUEUED_AT})


def _copy_of(message: dict[str, Any], queue_url: str, fifo: bool) -> dict[str, Any]:
    """The original job: its body and its own attributes, without the DLQ's reason attributes (marked released
    when the mis-keyed-producer guard held it)."""
    attributes = {
        name: {k: v for k, v in value.items() if k in ("DataType", "StringValue", "BinaryValue")}
        for name, value in message.get("MessageAttributes", {}).items()
        if not name.startswith(DeadLetter.PREFIX) or name in KEPT_BY_A_REDRIVE
    }
    held = reason_code(message)
    if held in GUARD_HOLDS:  # the mis-keyed-producer guard held it: an operator's redrive sends it
        attributes[CopyAttribute.RELEASED] = {"DataType": "String", "StringValue": held}
    request: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": message["Body"]}
    if attributes:
        request["MessageAttributes"] = attributes
    system = message.get("Attributes", {})
    if fifo:
        request["MessageGroupId"] = system.get("MessageGroupId", "sendonce-redrive")
        request["MessageDeduplicationId"] = message["MessageId"]
    elif system.get("MessageGroupId"):  # a standard queue's tenant (SQS fair queues) stays the job's
        request["MessageGroupId"] = system["MessageGroupId"]
    return request
