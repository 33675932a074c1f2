"""A message's size counted as SQS counts it: the body's UTF-8 bytes and every message attribute's name, data type
and value, against the queue's ``MaximumMessageSize``; a batch's messages together against SQS's 1 MiB.

Why: moto compares the body's length in characters alone, so a message whose attributes take it past the limit
(a consumer's delayed copy of a job at the queue's limit) was accepted, which SQS refuses. As SQS answers: a
single send over the limit is refused with ``InvalidParameterValue``; a batch entry over it fails alone, blamed
on the sender, and the rest of the batch is taken; a batch whose messages total more than 1 MiB is refused whole
with ``BatchRequestTooLong``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sendonce_contract.sqs_limits import SQS_MAX_BATCH_ENTRIES, SQS_MAX_MESSAGE_BYTES, message_bytes

from .wrap import wrap_once


def _too_long(limit: int) -> str:
    return f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."


def _sized_send(send_message: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send_message)
    def send(self: Any, queue_name: str, message_body: str, message_attributes: Any = None, *args: Any,
             **kwargs: Any) -> Any:
        from moto.sqs.exceptions import InvalidParameterValue

        limit = int(self.get_queue(queue_name).maximum_message_size)
        if message_bytes({"MessageBody": message_body, "MessageAttributes": message_attributes}) > limit:
            raise InvalidParameterValue(_too_long(limit))
        return send_message(self, queue_name, message_body, message_attributes, *args, **kwargs)

    return send


def _sized_batch(send_message_batch: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send_message_batch)
    def send_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        from moto.sqs.exceptions import BatchRequestTooLong

        if len(entries) > SQS_MAX_BATCH_ENTRIES:
            return send_message_batch(self, queue_name, entries)  # refused by moto as by SQS
        total = sum(message_bytes(entry) for entry in entries.values())
        if total > SQS_MAX_MESSAGE_BYTES:
            raise BatchRequestTooLong(total)
        # moto would refuse the whole batch for one entry over the limit: that entry fails alone instead.
        limit = int(self.get_queue(queue_name).maximum_message_size)
        fitting = {n: entry for n, entry in entries.items() if message_bytes(entry) <= limit}
        failed = [{"Id": entry["Id"], "SenderFault": True, "Code": "InvalidParameterValue",
                   "Message": _too_long(limit)} for n, entry in entries.items() if n not in fitting]
        if not fitting and failed:
            return [], failed
        messages, also_failed = send_message_batch(self, queue_name, fitting)
        return messages, [*failed, *also_failed]

    return send_batch


def count_sqs_message_sizes() -> None:
    """Wrap moto's SQS sends (a batch's entries go through the single send) with SQS's size rule (idempotent)."""
    from moto.sqs.models import SQSBackend

    wrap_once(SQSBackend, "send_message", _sized_send, "SQS message sizes")
    wrap_once(SQSBackend, "send_message_batch", _sized_batch, "SQS message sizes")
