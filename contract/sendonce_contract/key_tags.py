"""The SES message tags that carry a dedupe key and a pipeline, so SES's events lead back to the exact record.

SES tag values are 1-256 characters of letters, digits, ``_`` and ``-``. ``sendonce-key`` is the key made
readable in that alphabet (lossy for other characters and for long keys); when it is lossy, the exact key also
travels base64url-encoded (the same alphabet) in ``sendonce-k0`` .. ``sendonce-k5``: a 1024-byte key needs six.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Mapping, Sequence

DEDUPE_KEY_TAG = "sendonce-key"
KEY_CHUNK_TAG = "sendonce-k"
PIPELINE_TAG = "sendonce-pipeline"
TAG_VALUE_MAX = 256
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# SES allows 50 tags per email: ours are the readable key, up to six chunks and the pipeline.
RESERVED_TAG_COUNT = 8
MAX_JOB_TAGS = 50 - RESERVED_TAG_COUNT


def readable_key(dedupe_key: str) -> str:
    """The key in SES's tag alphabet; a hash suffix keeps altered or long keys distinct."""
    safe = _UNSAFE.sub("_", dedupe_key)
    if safe == dedupe_key and len(safe) <= TAG_VALUE_MAX:
        return safe
    digest = hashlib.sha256(dedupe_key.encode("utf-8")).hexdigest()[:16]
    return f"{safe[: TAG_VALUE_MAX - 17]}-{digest}"


def key_tags(dedupe_key: str) -> list[tuple[str, str]]:
    readable = readable_key(dedupe_key)
    tags = [(DEDUPE_KEY_TAG, readable)]
    if readable != dedupe_key:
        encoded = base64.urlsafe_b64encode(dedupe_key.encode("utf-8")).decode("ascii").rstrip("=")
        chunks = [encoded[i : i + TAG_VALUE_MAX] for i in range(0, len(encoded), TAG_VALUE_MAX)]
        tags += [(f"{KEY_CHUNK_TAG}{n}", chunk) for n, chunk in enumerate(chunks)]
    return tags


def key_from_tags(tags: Mapping[str, Sequence[str]]) -> str | None:
    """The exact dedupe key from an SES event's ``mail.tags`` (name -> list of values); None when absent or
    inconsistent (a chunk missing, or chunks that do not decode to the readable key)."""
    readable = _first(tags, DEDUPE_KEY_TAG)
    if readable is None:
        return None
    chunks: list[str] = []
    while (chunk := _first(tags, f"{KEY_CHUNK_TAG}{len(chunks)}")) is not None:
        chunks.append(chunk)
    if not chunks:
        return readable
    encoded = "".join(chunks)
    try:
        key = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return key if readable_key(key) == readable else None


def pipeline_of(tags: Mapping[str, Sequence[str]]) -> str | None:
    return _first(tags, PIPELINE_TAG)


def _first(tags: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = tags.get(name)
    if isinstance(values, str):
        return values
    if isinstance(values, Sequence) and values and isinstance(values[0], str):
        return values[0]
    return None
