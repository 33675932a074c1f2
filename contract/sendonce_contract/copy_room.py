"""The room a job leaves in its queue's maximum message size for the attributes of the consumer's delayed copies.

SQS counts a message's attributes (each name, data type and value) toward the queue's ``MaximumMessageSize``, and
every delayed copy of a job carries the copy attributes below. A job that filled the limit could never be copied:
each of its waits would spend a receive. So the producer refuses a job larger than the queue's limit less
``COPY_ATTRIBUTES_MAX_BYTES`` (``JobTooLarge``), and the consumer builds a copy's attributes within these bounds.
"""

from __future__ import annotations

from typing import Final

from .schema import GUARD_HOLDS, UNSENT_CLAIMS_CARRIED, CopyAttribute
from .sqs_limits import SQS_MAX_RECEIPT_HANDLE_CHARS

OWNER_TOKEN_CHARS: Final = 32  # a claim's owner token, uuid4().hex
# SES's message ids are 60 characters; SES documents no longest, so twice that and more.
SES_MESSAGE_ID_CHARS: Final = 128
NUMBER_CHARS: Final = 20  # a 64-bit integer in decimal, its sign included (a count, epoch milliseconds)

# Each attribute a copy may carry: its SQS data type and its longest value, in characters (all of them ASCII).
COPY_ATTRIBUTES: Final[dict[str, tuple[str, int]]] = {
    CopyAttribute.POSTPONEMENTS: ("Number", NUMBER_CHARS),
    CopyAttribute.SUPERSEDES: ("String", SQS_MAX_RECEIPT_HANDLE_CHARS),
    CopyAttribute.UNSENT_CLAIM: ("String", UNSENT_CLAIMS_CARRIED * (OWNER_TOKEN_CHARS + 1) - 1),  # space-separated
    CopyAttribute.UNRECORDED_SEND: ("String", OWNER_TOKEN_CHARS + 1 + SES_MESSAGE_ID_CHARS),  # "owner ses-message-id"
    CopyAttribute.PARKED_SINCE: ("Number", NUMBER_CHARS),
    CopyAttribute.RELEASED: ("String", max(len(reason.value) for reason in GUARD_HOLDS)),
    CopyAttribute.FIRST_QUEUED_AT: ("Number", NUMBER_CHARS),
    CopyAttribute.UNPARKED_AT: ("Number", NUMBER_CHARS),  # set by the schedule watch, not a copy: room kept for it
}
# The most bytes a copy's own attributes take, as SQS counts them.
COPY_ATTRIBUTES_MAX_BYTES: Final = sum(len(name) + len(kind) + longest
                                       for name, (kind, longest) in COPY_ATTRIBUTES.items())
