"""How a job is placed on a FIFO queue: one rule for every way a job gets there (``enqueue``, the outbox relay).

The message group is the job's first recipient (its bare address, domain lower-cased), unless the producer names a
group: one person's emails keep their order, and one slow or failing recipient never holds back another's. The
deduplication id is the SHA-256 of the dedupe key and of the sending it belongs to (one ``enqueue`` call, one outbox
row): SQS drops a retry of that sending within its 5-minute window, but never a job enqueued again on purpose (after
``sendonce resolve --resend``, or its key reused after ``dedupe_ttl``), which SQS would otherwise drop without a word
when it came within five minutes of the key's last enqueue. The dedupe ledger, not SQS's window, decides what is
sent.
"""

from __future__ import annotations

import hashlib
import secrets

from .address import Mailbox
from .message import InvalidMessage, parse_job

# A job that waits for its time would hold back every later job of its message group, and whether it still waits
# when a worker takes it depends on timing: on a FIFO queue any sendAt is refused, by the producer and the consumer.
SEND_AT_ON_FIFO = ("sendAt is refused on a FIFO queue: a waiting job would hold back every later job of its message "
                   "group; schedule on a standard queue, or enqueue the job when it is due")


def bare_address(mailbox: Mailbox) -> str:
    """``Ada <Ada@Example.org>`` is ``Ada@example.org``: domains are case-insensitive, local parts may not be."""
    return f"{mailbox.local_part}@{mailbox.domain.lower()}"


def deduplication_id(dedupe_key: str, sending: str) -> str:
    return hashlib.sha256(f"{sending}\n{dedupe_key}".encode()).hexdigest()


def new_sending() -> str:
    """A sending of its own, for an ``enqueue`` call (its SDK's retries share its request, so its id)."""
    return secrets.token_hex(16)


def fifo_message_ids(body: str, dedupe_key: str, sending: str, group_id: str | None = None) -> dict[str, str]:
    """``MessageGroupId`` and ``MessageDeduplicationId`` for the job ``body``, sent as ``sending`` (what makes this
    sending one: ``new_sending()`` for an enqueue, the outbox row's identity for a relay).

    A body the contract refuses (which the consumer will dead-letter with its reason) is grouped by its key: it
    has no recipient to group by, and it must still be relayed rather than lost.
    """
    if group_id is None:
        try:
            group_id = bare_address(parse_job(body, sqs_message_id="").to[0])
        except InvalidMessage:
            group_id = dedupe_key
    return {"MessageGroupId": group_id, "MessageDeduplicationId": deduplication_id(dedupe_key, sending)}
