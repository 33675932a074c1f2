"""Private keys: the keyed digest that stands for a dedupe key everywhere outside the job body.

With ``key_privacy`` on, the consumer writes ``key_digest(secret, key)`` where it would write the key: the ledger's
partition key, SES's tags (hence every SES event), log lines, metrics and the DLQ's attributes. It is
HMAC-SHA256 under a secret the construct keeps in Secrets Manager: without the secret nobody can test a guess
(``order-1042:shipped:ada@example.org`` is easy to guess), with it the operator command turns a clear key into
the record's key. The digest is in SES's tag alphabet and short enough for one tag.
"""

from __future__ import annotations

import hashlib
import hmac
import re

DIGEST_PREFIX = "hmac-"  # tells a digest from a clear key in a listing
_DIGEST = re.compile(rf"^{DIGEST_PREFIX}[0-9a-f]{{64}}$")


def key_digest(secret: bytes, dedupe_key: str) -> str:
    return DIGEST_PREFIX + hmac.new(secret, dedupe_key.encode("utf-8"), hashlib.sha256).hexdigest()


def is_digest(text: str) -> bool:
    return _DIGEST.match(text) is not None


class KeyDigester:
    """``key_digest`` with the secret's HMAC state computed once: each key then costs two SHA-256 blocks."""

    def __init__(self, secret: bytes) -> None:
        self._keyed = hmac.new(secret, digestmod=hashlib.sha256)

    def __call__(self, dedupe_key: str) -> str:
        mac = self._keyed.copy()
        mac.update(dedupe_key.encode("utf-8"))
        return DIGEST_PREFIX + mac.hexdigest()

    def __repr__(self) -> str:
        return "KeyDigester(<secret>)"  # never the secret, should one be printed
