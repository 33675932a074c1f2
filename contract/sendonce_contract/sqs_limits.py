"""SQS's limits and the rules built on them (the visibility timeout synth enforces and the runtime counts on; the
batches SQS takes whole): defined here once, so the construct's rules, the producer and the consumer's redelivery
cannot disagree on a figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Final, TypeVar

_Entry = TypeVar("_Entry")

SQS_MAX_VISIBILITY_S: Final = 43_200  # 12 hours, the longest visibility timeout
SQS_MAX_DELAY_S: Final = 900  # 15 minutes, the longest DelaySeconds of a message
SQS_MIN_RETENTION_S: Final = 60
SQS_MAX_RETENTION_S: Final = 1_209_600  # 14 days
SQS_DEFAULT_RETENTION_S: Final = 345_600  # 4 days, a queue's retention when none is set
# The largest message a queue may be set to take (body and message attributes together): 1 MiB since 2025.
SQS_MIN_MESSAGE_BYTES: Final = 1_024
SQS_MAX_MESSAGE_BYTES: Final = 1_048_576
# The job queues' maximum message size when max_message_size_bytes is unset, written into the template: SQS's own
# default rose to 1 MiB in 2025, and a batch of ten of those would not fit one Lambda invocation (6 MB).
SQS_DEFAULT_MESSAGE_BYTES: Final = 262_144  # 256 KiB
SQS_MAX_BATCH_ENTRIES: Final = 10  # the messages one SendMessageBatch carries at most
SQS_MAX_RECEIPT_HANDLE_CHARS: Final = 1_024  # the longest receipt handle SQS hands out, by its documentation
SQS_MAX_BATCH_BYTES: Final = 262_144  # what one SendMessageBatch may carry in all (SQS's long-standing limit)

# AWS's guidance for a Lambda event source: the queue's visibility timeout is at least this many function timeouts
# (plus the batching window). Synth refuses less (``minimum_visibility_timeout_s``).
VISIBILITY_FACTOR: Final = 6
# What the consumer can count on while it handles a message: the invocation holding it spends at most one function
# timeout of the visibility timeout, so the message stays out of sight at least this many more.
VISIBLE_AFTER_TIMEOUTS: Final = VISIBILITY_FACTOR - 1


def minimum_visibility_timeout_s(function_timeout_s: float, max_batching_window_s: float) -> float:
    """The shortest visibility timeout synth allows: ``VISIBILITY_FACTOR`` function timeouts, plus the window."""
    return VISIBILITY_FACTOR * function_timeout_s + max_batching_window_s


def message_bytes(request: dict[str, Any]) -> int:
    """The size SQS counts for a SendMessage request or batch entry: its body's UTF-8 bytes, and its message
    attributes' names, types and values (a binary value's own bytes; 0 for an entry that carries no message)."""
    attributes = request.get("MessageAttributes") or {}
    return len(request.get("MessageBody", "").encode("utf-8")) + sum(
        len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8")) + _value_bytes(value)
        for name, value in attributes.items())


def _value_bytes(value: dict[str, Any]) -> int:
    binary = value.get("BinaryValue")
    if isinstance(binary, bytes | bytearray):
        return len(binary)
    return len(str(value.get("StringValue", "")).encode("utf-8"))


def batches(items: Iterable[tuple[_Entry, dict[str, Any]]]) -> Iterator[list[tuple[_Entry, dict[str, Any]]]]:
    """``(item, SendMessage request)`` pairs in batches SQS takes: at most ten entries and at most
    ``SQS_MAX_BATCH_BYTES`` of messages each (an entry larger than that goes alone)."""
    batch: list[tuple[_Entry, dict[str, Any]]] = []
    size = 0
    for item, request in items:
        length = message_bytes(request)
        if batch and (len(batch) == SQS_MAX_BATCH_ENTRIES or size + length > SQS_MAX_BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((item, request))
        size += length
    if batch:
        yield batch
