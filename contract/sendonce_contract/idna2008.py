"""The IDNA 2008 rules a domain label must follow (RFC 5890-5892), as far as an email's domain needs them.

Python's own ``encodings.idna`` is IDNA 2003: it maps compatibility characters (a full-width hyphen becomes
``-``) and never checks that an ``xn--`` label is valid punycode. This module applies the 2008 rules instead,
with no dependency:

- hyphens: no label starts or ends with one, and ``--`` in the third and fourth positions is reserved for
  ``xn--`` labels (RFC 5891 section 4.2.3.1);
- an ``xn--`` label (an A-label) must decode as punycode to a valid U-label with a non-ASCII character, and
  encode back to itself (RFC 5891 section 5.4);
- a U-label (non-ASCII) is lower-cased (the only mapping applied, as RFC 5895 suggests), must be in NFC, must
  not start with a combining mark, and every character must be PVALID: a letter, digit or mark that no
  compatibility mapping or case folding changes (RFC 5892's LetterDigits and Unstable rules, with its
  exceptions); characters that need a context rule (joiners, the middle dot) are refused;
- the top-level label is letters, or a valid A-label (RFC 1123 section 2 and the root zone's practice): it is
  never all digits, and never holds a digit or a hyphen unless it is an A-label.
"""

from __future__ import annotations

import re

ACE_PREFIX = "xn--"
MAX_LABEL_OCTETS = 63
_LDH = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_TLD = re.compile(r"^[A-Za-z]{2,63}$")
# RFC 5892 section 2.1: the general categories of letters, digits and marks.
_LETTER_DIGITS = frozenset({"Ll", "Lu", "Lo", "Nd", "Lm", "Mn", "Mc"})
# RFC 5892 section 2.6: PVALID although their case folding or compatibility form differs.
_PVALID_EXCEPTIONS = frozenset({"\u00df", "\u03c2", "\u06fd", "\u06fe", "\u0f0b", "\u3007"})


class InvalidLabel(ValueError):
    """A domain label IDNA 2008 does not allow; the message says which rule."""


def to_ascii_label(label: str) -> str:
    """The label as SES receives it (ASCII: an A-label for a non-ASCII one); raises :class:`InvalidLabel`."""
    if label.isascii():
        if label[:4].lower() == ACE_PREFIX:
            check_a_label(label)
            return label
        check_ldh(label)
        return label
    u_label = label.lower()
    check_u_label(u_label)
    a_label = ACE_PREFIX + u_label.encode("punycode").decode("ascii")
    if len(a_label) > MAX_LABEL_OCTETS:
        raise InvalidLabel(f"it is {len(a_label)} octets in punycode ({a_label!r}); a label holds at most "
                           f"{MAX_LABEL_OCTETS}")
    return a_label


def check_ldh(label: str) -> None:
    """An ASCII label: letters, digits and hyphens, no hyphen at either end, none in both positions 3 and 4."""
    if not _LDH.match(label):
        raise InvalidLabel(f"labels are 1-{MAX_LABEL_OCTETS} letters, digits or hyphens, not starting or ending "
                           "with a hyphen")
    if label[2:4] == "--":
        raise InvalidLabel("it has hyphens in its third and fourth positions, which IDNA 2008 reserves for "
                           "internationalised (xn--) labels (RFC 5891 4.2.3.1)")


def check_a_label(label: str) -> None:
    """An ``xn--`` label must be punycode for a valid U-label, and encode back to exactly itself."""
    if not _LDH.match(label):
        raise InvalidLabel(f"labels are 1-{MAX_LABEL_OCTETS} letters, digits or hyphens, not starting or ending "
                           "with a hyphen")
    encoded = label[len(ACE_PREFIX):].lower()
    try:
        u_label = encoded.encode("ascii").decode("punycode")
    except (UnicodeError, ValueError, IndexError, OverflowError):
        raise InvalidLabel("it starts with xn-- but is not valid punycode (RFC 3492)") from None
    if u_label.isascii():
        raise InvalidLabel("it starts with xn-- but encodes only ASCII: an A-label stands for a non-ASCII name")
    try:
        check_u_label(u_label)
    except InvalidLabel as error:
        raise InvalidLabel(f"it decodes to {u_label!r}, and {error}") from None
    if u_label.encode("punycode").decode("ascii") != encoded:
        raise InvalidLabel(f"it decodes to {u_label!r}, which does not encode back to the same label (IDNA 2008 "
                           "requires the round trip)")


def check_u_label(label: str) -> None:
    """A lower-cased non-ASCII label: NFC, no leading mark, hyphen rules, every character PVALID."""
    import unicodedata  # here, not at the top: only a non-ASCII domain needs it, and loading it costs a cold start

    if unicodedata.normalize("NFC", label) != label:
        raise InvalidLabel("it is not in Unicode normalisation form C")
    if unicodedata.category(label[0]) in ("Mn", "Mc", "Me"):
        raise InvalidLabel("it starts with a combining mark")
    if label.startswith("-") or label.endswith("-"):
        raise InvalidLabel("it starts or ends with a hyphen")
    if label[2:4] == "--":
        raise InvalidLabel("it has hyphens in its third and fourth positions (RFC 5891 4.2.3.1)")
    for char in label:
        if not _pvalid(char):
            name = unicodedata.name(char, "unnamed")
            raise InvalidLabel(f"it holds U+{ord(char):04X} ({name}), which IDNA 2008 does not allow in a name")


def _pvalid(char: str) -> bool:
    import unicodedata  # see check_u_label

    if char.isascii():
        return char.isalnum() or char == "-"
    if char in _PVALID_EXCEPTIONS:
        return True
    if unicodedata.category(char) not in _LETTER_DIGITS:
        return False
    # Unstable (RFC 5892 2.3): what NFKC or case folding changes, such as a full-width letter, is not a name.
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", char).casefold()) == char


def check_top_level(ascii_label: str) -> None:
    """The last label of a domain: letters, or an A-label (checked already)."""
    if ascii_label[:4].lower() == ACE_PREFIX or _TLD.match(ascii_label):
        return
    if ascii_label.isdigit():
        raise InvalidLabel("is all digits")
    raise InvalidLabel("must be 2-63 letters, or an internationalised (xn--) label: top-level domains hold no "
                       "digits or hyphens")
