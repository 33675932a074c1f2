"""Dedupe keys that name the outcome: the event, the template and the recipient, never an attempt."""

from __future__ import annotations

from sendonce_contract.address import InvalidAddress, parse_mailbox
from sendonce_contract.fifo import bare_address
from sendonce_contract.message import InvalidMessage, check_key

SEPARATOR = ":"


def _escape(part: str) -> str:
    # Escape the escape first, then the separator: ("a:b", "c") and ("a", "b:c") can never meet.
    return part.replace("\\", "\\\\").replace(SEPARATOR, "\\" + SEPARATOR)


def normalise_address(address: str) -> str:
    """The bare address as SES receives it, domain lower-cased (domains are case-insensitive; local parts may not
    be), parsed by the consumer's own address parser: ``Ada <Ada@Bücher.example>`` is ``Ada@xn--bcher-kva.example``."""
    try:
        mailbox = parse_mailbox(address)
    except InvalidAddress as error:
        raise ValueError(f"recipient {address!r} is not a valid email address: it {error}") from None
    return bare_address(mailbox)


def dedupe_key(*parts: str | int, recipient: str | None = None) -> str:
    """``dedupe_key("order-1042", "shipped", recipient="Ada <ada@Example.org>")``
    is ``order-1042:shipped:ada@example.org``.

    Build it from the event and the template (and the recipient when one event mails several people), never from
    an SQS message id or a hash of the content: a re-enqueued job must produce the same key.
    """
    if not parts:
        raise ValueError("a dedupe key needs at least one part naming the event, e.g. the order id")
    texts = [str(part) for part in parts]
    if any(not text for text in texts):
        raise ValueError("dedupe key parts must not be empty")
    if recipient is not None:
        texts.append(normalise_address(recipient))
    key = SEPARATOR.join(_escape(text) for text in texts)
    try:
        check_key(key)
    except InvalidMessage as error:
        raise ValueError(f"{error.reason}: use shorter parts, without control characters or white space at the ends"
                         ) from None
    return key
