"""The job's ``headers``: extra header fields SES adds to the email it builds (SESv2 ``Headers``), and their rules.

A name follows RFC 5322's field-name rule (printable ASCII but the colon), which is also SESv2's pattern, 1 to 126
characters; a value is one line of printable ASCII (no CR, LF, NUL or other control character), 1 to 995
characters (SESv2's limit since March 2026; 870 before); at most 15 headers (SESv2's). Names are told apart
without regard to case: two spellings of one name are one header given twice, refused.

Refused, because SES or sendonce writes them from the job's own fields or SES sets them itself: the origin and
destination fields, the subject, date and ids, the MIME and content fields (SES builds the MIME structure), the
trace and signature fields, and SES's own ``X-SES-*`` fields. ``List-Unsubscribe-Post`` (RFC 8058 one-click
unsubscribe) must be ``List-Unsubscribe=One-Click`` and needs a ``List-Unsubscribe`` holding an https URL: a
mailbox provider offers the button only then, and would POST to nothing otherwise.
"""

from __future__ import annotations

import re

MAX_HEADERS = 15  # SESv2's MessageHeaderList
MAX_NAME_CHARS = 126  # SESv2's MessageHeaderName
MAX_VALUE_CHARS = 995  # SESv2's MessageHeaderValue (botocore's model; 870 until March 2026)
# RFC 5322 3.6.8: field-name = 1*ftext, ftext = %d33-57 / %d59-126 (printable ASCII but ":").
FIELD_NAME = re.compile(r"^[!-9;-~]{1,126}$")
# SESv2's value pattern: printable ASCII and the space; so no CR, LF, NUL, tab or other control character.
FIELD_VALUE = re.compile(rf"^[ -~]{{1,{MAX_VALUE_CHARS}}}$")

ENTITY_REF_ID = "X-Entity-Ref-ID"
LIST_UNSUBSCRIBE = "List-Unsubscribe"
LIST_UNSUBSCRIBE_POST = "List-Unsubscribe-Post"
ONE_CLICK = "List-Unsubscribe=One-Click"  # RFC 8058's only value

# Lower-case names refused as they are: written from the job's fields (from, to, cc, bcc, replyTo, subject) or by
# SES itself (date, ids, MIME, trace and signatures).
RESERVED_NAMES = frozenset({
    "from", "sender", "to", "cc", "bcc", "reply-to", "subject", "date", "message-id", "mime-version",
    "return-path", "received", "dkim-signature", "domainkey-signature", "feedback-id",
    "resent-from", "resent-sender", "resent-to", "resent-cc", "resent-bcc", "resent-date", "resent-message-id",
})
# Lower-case prefixes refused: the MIME content fields (SES builds the structure) and SES's own fields.
RESERVED_PREFIXES = ("content-", "x-ses-")
_HTTPS_URL = re.compile(r"<https://[^<>\s]+>", re.IGNORECASE)


class HeaderError(ValueError):
    """A header the contract refuses; ``refused`` when it is a header SES or sendonce sets, or a broken
    one-click unsubscribe (its own dead-letter reason), not a malformed one."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.refused = refused


def is_reserved(name: str) -> bool:
    lowered = name.lower()
    return lowered in RESERVED_NAMES or lowered.startswith(RESERVED_PREFIXES)


def parse_headers(value: object) -> tuple[tuple[str, str], ...]:
    """The job's ``headers`` object as (name, value) pairs in the job's order; raises :class:`HeaderError`."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise HeaderError("headers must be an object of header names to one-line string values")
    if len(value) > MAX_HEADERS:
        raise HeaderError(f"headers has {len(value)} entries; SES takes at most {MAX_HEADERS}")
    seen: dict[str, str] = {}
    pairs = []
    for name, text in value.items():
        _check_name(name)
        _check_value(name, text)
        if name.lower() in seen:
            raise HeaderError(f"header {name!r} is given twice (as {seen[name.lower()]!r} too): names are told "
                              "apart without regard to case")
        seen[name.lower()] = name
        pairs.append((name, text))
    _check_one_click(dict((n.lower(), v) for n, v in pairs))
    return tuple(pairs)


def _check_name(name: str) -> None:
    if not FIELD_NAME.match(name):
        raise HeaderError(f"header name {name[:80]!r} must be 1-{MAX_NAME_CHARS} printable ASCII characters "
                          "without a colon or space (RFC 5322's field-name)")
    if is_reserved(name):
        raise HeaderError(f"header {name!r} is refused: SES or sendonce sets it (the job's from, to, cc, bcc, "
                          "replyTo and subject fields; SES's date, ids, MIME, content and X-SES-* fields)",
                          refused=True)


def _check_value(name: str, text: object) -> None:
    if not isinstance(text, str):
        raise HeaderError(f"header {name!r} must have a string value")
    if not FIELD_VALUE.match(text):
        if not text:
            raise HeaderError(f"header {name!r} has an empty value")
        if len(text) > MAX_VALUE_CHARS:
            raise HeaderError(f"header {name!r} has {len(text)} characters; SES takes at most {MAX_VALUE_CHARS}")
        raise HeaderError(f"header {name!r}'s value must be one line of printable ASCII (no CR, LF, NUL or other "
                          "control character; encode other text as RFC 2047 words)")


def _check_one_click(by_name: dict[str, str]) -> None:
    post = by_name.get(LIST_UNSUBSCRIBE_POST.lower())
    if post is None:
        return
    if post != ONE_CLICK:
        raise HeaderError(f"{LIST_UNSUBSCRIBE_POST} must be {ONE_CLICK!r} (RFC 8058)", refused=True)
    if not _HTTPS_URL.search(by_name.get(LIST_UNSUBSCRIBE.lower(), "")):
        raise HeaderError(f"{LIST_UNSUBSCRIBE_POST} needs a {LIST_UNSUBSCRIBE} header holding an https URL in "
                          "angle brackets (RFC 8058): the one-click POST goes to that URL", refused=True)
