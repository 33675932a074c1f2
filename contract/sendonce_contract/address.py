"""One mailbox per string, checked strictly, and the exact text SES receives for it.

Accepted: ``local@domain`` or ``Display Name <local@domain>`` (the name as words, or as a quoted string).
The local part is a dot-atom (RFC 5322 section 3.4.1) of at most 64 octets; the domain is host names of letters,
digits and hyphens, at least two labels, at most 253 octets, with internationalised labels checked by IDNA 2008's
rules and sent as punycode (``idna2008``); the whole address is at most 254 octets (RFC 5321's path limit).
Refused, each with its own reason: lists of addresses in one string, group syntax, comments, quoted local parts,
domain literals, a non-ASCII local part (SES has no SMTPUTF8) and control characters. A non-ASCII display name
is sent RFC 2047-encoded, as SES requires.
"""

from __future__ import annotations

import base64
import re
from typing import NamedTuple

from .idna2008 import InvalidLabel, check_top_level, to_ascii_label

MAX_LOCAL_OCTETS = 64
MAX_DOMAIN_OCTETS = 253
MAX_ADDRESS_OCTETS = 254
MAX_DISPLAY_NAME_CHARS = 256
_ATEXT = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~\-"
_DOT_ATOM = re.compile(rf"^[{_ATEXT}]+(\.[{_ATEXT}]+)*$")
# A display name needs no quotes when it is words of atext (and dots, as RFC 5322's obsolete phrase allows).
_BARE_NAME = re.compile(rf"^[{_ATEXT}.]+( [{_ATEXT}.]+)*$")
# Rare paths (a quoted display name, a refusal's text) name their patterns, which ``re`` compiles at first use and
# caches: compiling them at import would cost every cold start.
_QUOTED_STRING = r'"(?:[^"\\]|\\.)*"'
# Raw bytes per RFC 2047 encoded word: 45 bytes are 60 base64 characters, 72 with "=?utf-8?b?" and "?=".
_ENCODED_WORD_BYTES = 45


class InvalidAddress(ValueError):
    """The string is not exactly one mailbox this contract accepts; the message says why."""


class Mailbox(NamedTuple):
    local_part: str
    domain: str  # ASCII: internationalised labels already in punycode
    display_name: str | None = None

    @property
    def address(self) -> str:
        return f"{self.local_part}@{self.domain}"

    @property
    def for_ses(self) -> str:
        """The header text SES receives: ASCII only, one line, the display name encoded when it must be."""
        if not self.display_name:
            return self.address
        return f"{_display_name_for_header(self.display_name)} <{self.address}>"


# Anything shaped like an address in free text (SES's refusal messages name the addresses they refuse).
_ADDRESS_IN_TEXT = r"""[^\s<>()\[\],;:"']+@[^\s<>()\[\],;:"']*|@[^\s<>()\[\],;:"']+"""
REDACTED_ADDRESS = "<address>"


def redact_addresses(text: str) -> str:
    """``text`` with every address-shaped word replaced, so that it can go to a log line or a DLQ attribute."""
    return re.sub(_ADDRESS_IN_TEXT, REDACTED_ADDRESS, text)


def find_control_character(text: str) -> str | None:
    """The first C0 control character or DEL in ``text``, as U+XXXX; header fields must be one clean line."""
    for char in text:
        if (ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F:
            return f"U+{ord(char):04X}"
    return None


def parse_mailbox(value: str) -> Mailbox:
    """Parse one mailbox; raises :class:`InvalidAddress` with the reason."""
    control = find_control_character(value)
    if control is not None:
        raise InvalidAddress(f"contains a control character ({control}): line breaks and NUL are never allowed")
    text = value.strip()
    if not text:
        raise InvalidAddress("is empty")
    angle = _split_outside_quotes(text)
    if angle is None:
        return _addr_spec(text)
    phrase, addr_spec = angle
    return _addr_spec(addr_spec)._replace(display_name=_display_name(phrase))


def _split_outside_quotes(text: str) -> tuple[str, str] | None:
    """(display name, address) for ``name <address>``, None for a bare address; refuses what is not one mailbox."""
    quoted = escaped = False
    opening: int | None = None
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in ",;":
            raise InvalidAddress(f"holds more than one address ({char!r} outside quotes): give each its own entry")
        elif char == "(":
            raise InvalidAddress("has a comment in parentheses; comments are not accepted")
        elif char in "[]":
            raise InvalidAddress("has square brackets: IP address literals are not accepted; use a host name")
        elif char == ":" and opening is None:
            raise InvalidAddress("uses group syntax (name: addresses;): list each address as its own entry")
        elif char == "<":
            if opening is not None:
                raise InvalidAddress("has more than one '<'")
            opening = index
    if quoted:
        raise InvalidAddress("has an unclosed quote")
    if opening is None:
        if ">" in text:
            raise InvalidAddress("has '>' without '<'")
        return None
    if not text.endswith(">") or text.count(">") != 1:
        raise InvalidAddress("must end with the address in angle brackets, e.g. Shop <receipts@example.com>")
    return text[:opening].strip(), text[opening + 1 : -1]


def _display_name(phrase: str) -> str | None:
    if not phrase:
        return None
    if phrase.startswith('"'):
        match = re.match(_QUOTED_STRING, phrase)
        if match is None or match.end() != len(phrase):
            raise InvalidAddress("display name mixes quoted and unquoted words: quote the whole name")
        name = re.sub(r"\\(.)", r"\1", phrase[1:-1])
    elif '"' in phrase:
        raise InvalidAddress("display name mixes quoted and unquoted words: quote the whole name")
    else:
        bad = sorted({c for c in phrase if c in '()<>[]:;@\\,"' or (c.isascii() and not c.isprintable())})
        if bad:
            raise InvalidAddress(f"display name has {''.join(bad)!r} outside quotes: quote the name")
        name = " ".join(phrase.split())
    name = name.strip()
    if len(name) > MAX_DISPLAY_NAME_CHARS:
        raise InvalidAddress(f"display name is {len(name)} characters; the limit is {MAX_DISPLAY_NAME_CHARS}")
    return name or None


def _addr_spec(text: str) -> Mailbox:
    if any(c.isspace() for c in text):
        raise InvalidAddress("has white space inside the address")
    if text.startswith('"'):
        raise InvalidAddress("has a quoted local part; only dot-atom local parts (no quotes) are accepted")
    local, at, domain = text.rpartition("@")
    if not at:
        raise InvalidAddress("has no '@'")
    if not local:
        raise InvalidAddress("has an empty local part")
    if not local.isascii():
        raise InvalidAddress("has a non-ASCII local part: SES cannot send to it (no SMTPUTF8); only the domain may be "
                             "internationalised")
    _check_local(local)
    ascii_domain = _ascii_domain(domain)
    address = f"{local}@{ascii_domain}"
    if len(address) > MAX_ADDRESS_OCTETS:
        raise InvalidAddress(f"is {len(address)} octets; the limit is {MAX_ADDRESS_OCTETS}")
    return Mailbox(local, ascii_domain)


def _check_local(local: str) -> None:
    if len(local) > MAX_LOCAL_OCTETS:
        raise InvalidAddress(f"has a local part of {len(local)} octets; the limit is {MAX_LOCAL_OCTETS}")
    if _DOT_ATOM.match(local):
        return
    if local.startswith(".") or local.endswith("."):
        raise InvalidAddress("has a local part that starts or ends with a dot")
    if ".." in local:
        raise InvalidAddress("has two dots in a row in the local part")
    bad = sorted({c for c in local if c != "." and not re.match(rf"[{_ATEXT}]", c)})
    raise InvalidAddress(f"has {''.join(bad)!r} in the local part, which only quoting allows (not accepted)")


def _ascii_domain(domain: str) -> str:
    if not domain:
        raise InvalidAddress("has an empty domain")
    labels = domain.split(".")
    if any(not label for label in labels):
        raise InvalidAddress(f"has an empty label in the domain {domain!r}")
    ascii_labels = [_ascii_label(label) for label in labels]
    if len(ascii_labels) < 2:
        raise InvalidAddress(f"has the domain {domain!r}, which is not a fully qualified host name")
    try:
        check_top_level(ascii_labels[-1])
    except InvalidLabel as error:
        raise InvalidAddress(f"has the domain {domain!r}, whose top-level label {error}") from None
    ascii_domain = ".".join(ascii_labels)
    if len(ascii_domain) > MAX_DOMAIN_OCTETS:
        raise InvalidAddress(f"has a domain of {len(ascii_domain)} octets; the limit is {MAX_DOMAIN_OCTETS}")
    return ascii_domain


def _ascii_label(label: str) -> str:
    try:
        return to_ascii_label(label)
    except InvalidLabel as error:
        raise InvalidAddress(f"has the domain label {label!r}: {error}") from None


def _display_name_for_header(name: str) -> str:
    if not name.isascii():
        return _rfc2047(name)
    if _BARE_NAME.match(name):
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _rfc2047(name: str) -> str:
    """Encoded words of at most 75 characters each, split between characters, joined by a space on one line."""
    words: list[bytes] = []
    chunk = b""
    for char in name:
        encoded = char.encode("utf-8")
        if len(chunk) + len(encoded) > _ENCODED_WORD_BYTES:
            words.append(chunk)
            chunk = b""
        chunk += encoded
    words.append(chunk)
    return " ".join(f"=?utf-8?b?{base64.b64encode(word).decode('ascii')}?=" for word in words)
