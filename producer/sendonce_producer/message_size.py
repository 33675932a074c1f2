"""How large a message may be: a job's message checked against its queue's maximum message size, less the room
every delayed copy of it needs for its attributes (``copy_room``: SQS counts them toward the limit), before it is
sent, so a job too large is refused in the producer, naming its size, the limit, why and the fix, rather than by
SQS later, or by SQS refusing each of its copies.

The limit is the one the pipeline was deployed with (the construct's ``max_message_size_bytes``): given by the
caller, or read from the queue itself (``MaximumMessageSize``; ``grant_enqueue`` grants the read). A limit read is
kept per queue to let jobs through; a job over it is checked against a fresh read before it is refused, so a
redeploy that raised the limit never refuses a job the queue now takes.
"""

from __future__ import annotations

import threading
from typing import Any

from sendonce_contract.copy_room import COPY_ATTRIBUTES_MAX_BYTES
from sendonce_contract.sqs_limits import SQS_MAX_MESSAGE_BYTES, message_bytes

from .job import EmailJob, InvalidJob

_read_limits: dict[str, int] = {}  # queue URL -> its MaximumMessageSize, as last read
_lock = threading.Lock()


class JobTooLarge(InvalidJob):
    """A job whose message is larger than its queue takes with room for a copy's attributes (``limit_bytes``);
    nothing was sent."""

    def __init__(self, reason: str, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(reason)
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


def check_message_size(job: EmailJob, request: dict[str, Any], queue_url: str, sqs: Any, limit: int | None,
                       store: bool) -> None:
    """``JobTooLarge`` when ``request`` (``job``'s SendMessage) is over the queue's maximum message size (``limit``
    when given, else the queue's own) less ``COPY_ATTRIBUTES_MAX_BYTES``. ``store``: the job went through an
    attachments store (its large files are in the bucket)."""
    size = message_bytes(request)
    with_copy_room = size + COPY_ATTRIBUTES_MAX_BYTES  # more than the smallest queue takes: every job is checked
    if limit is None:
        with _lock:
            known = _read_limits.get(queue_url)
        if known is not None and with_copy_room <= known:
            return
        limit = _read_limit(queue_url, sqs)
    if with_copy_room > limit:
        largest = max(0, limit - COPY_ATTRIBUTES_MAX_BYTES)
        raise JobTooLarge(f"{job.dedupe_key!r}: the job's message is {size:,} bytes, over the {largest:,} bytes a job "
                          f"may be: the queue's maximum message size of {limit:,} bytes, less "
                          f"{COPY_ATTRIBUTES_MAX_BYTES:,} for the attributes the consumer's delayed copies of it carry "
                          f"(SQS counts them toward the limit); nothing was sent. {_fix(job, limit, store)}",
                          size, largest)


def _read_limit(queue_url: str, sqs: Any) -> int:
    """The queue's MaximumMessageSize, read now; SQS's own ceiling when it cannot be read (a role granted
    SendMessage alone: SQS then answers for a job between the two itself, and the read is not tried per job)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["MaximumMessageSize"])
        limit = int(attributes["Attributes"]["MaximumMessageSize"])
    except (BotoCoreError, ClientError, KeyError, ValueError):
        limit = SQS_MAX_MESSAGE_BYTES
    with _lock:
        _read_limits[queue_url] = limit
    return limit


def _fix(job: EmailJob, limit: int, store: bool) -> str:
    larger = ("" if limit >= SQS_MAX_MESSAGE_BYTES else
              f", or deploy the queue with a larger max_message_size_bytes (up to {SQS_MAX_MESSAGE_BYTES:,})")
    if not any(attachment.content is not None for attachment in job.attachments):
        return f"Shorten its content{larger}"
    if store:
        return ("Its files over the store's inline_limit_bytes are in the attachments bucket already: lower "
                f"inline_limit_bytes so more of them go there{larger}")
    return ("Send its files through the pipeline's attachments bucket (the construct's attachments_bucket; "
            "Pipeline(attachments_bucket=...) or enqueue(..., attachments=AttachmentStore(bucket))), so each is "
            f"uploaded and the job carries a reference{larger}")
