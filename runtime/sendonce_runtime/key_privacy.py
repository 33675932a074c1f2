"""The consumer's side of ``key_privacy``: every key the job names becomes its keyed digest right after parsing,
so the ledger, SES's tags, the log lines, the metrics and the DLQ's attributes never see the key's text.

The secret is read from Secrets Manager once per execution environment, on the first record that needs it, and
kept in memory only: it is never logged, and no exception raised here carries it.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.key_digest import KeyDigester
from sendonce_contract.message import InvalidMessage, ParsedJob, preview
from sendonce_contract.schema import DEDUPE_KEY
from sendonce_contract.tenant import tenant_label

from .checks import ParseJob

REDACTED_KEY = f"<{DEDUPE_KEY}>"  # stands for the key text a reason quoted


class KeySecretUnavailable(RuntimeError):
    """Secrets Manager did not give the key secret: the record is retried, nothing was claimed or sent."""


class PrivateKeys:
    def __init__(self, secrets_client: Any, secret_id: str) -> None:
        self._client = secrets_client
        self._secret_id = secret_id
        self._lock = threading.Lock()
        self._digest: KeyDigester | None = None

    def _digester(self) -> KeyDigester:
        with self._lock:
            if self._digest is None:
                try:
                    response = self._client.get_secret_value(SecretId=self._secret_id)
                except (ClientError, BotoCoreError) as error:
                    raise KeySecretUnavailable(f"cannot read the key secret: {type(error).__name__}") from None
                secret = response.get("SecretString")
                if not isinstance(secret, str) or not secret:
                    raise KeySecretUnavailable("the key secret is empty or binary; it must be a non-empty string")
                self._digest = KeyDigester(secret.encode("utf-8"))
            return self._digest

    def digest(self, dedupe_key: str) -> str:
        return self._digester()(dedupe_key)

    def job(self, job: ParsedJob) -> ParsedJob:
        """The job with its key replaced by the digest: what the ledger, SES's tags and the logs carry. The payload
        hash is keyed too: an unkeyed hash of a templated body would let a guess of the key be tested."""
        digest = self._digester()
        return job._replace(dedupe_key=digest(job.dedupe_key), payload_hash=digest(job.payload_hash))

    def invalid(self, body: str, error: InvalidMessage) -> tuple[str | None, str]:
        """The DLQ's key attribute and reason for a message that broke the contract: the digest of its key, if it
        named a valid one, and the reason with the key's text taken out (a reason may quote an invalid key)."""
        reason = error.reason
        text = _key_text(body)
        if text:  # the contract quotes a key only as preview() does (a bare replace would garble short keys)
            reason = reason.replace(preview(text), REDACTED_KEY)
        return (self.digest(error.dedupe_key) if error.dedupe_key else None), reason


class ParsePrivateJob(ParseJob):
    """Under key_privacy: every key the job names becomes its keyed digest right after parsing, everywhere."""

    def __init__(self, private_keys: PrivateKeys) -> None:
        self.private_keys = private_keys

    def job(self, job: ParsedJob) -> ParsedJob:
        return self.private_keys.job(job)

    def key(self, dedupe_key: str) -> str:
        return self.private_keys.digest(dedupe_key)

    def invalid(self, body: str, error: InvalidMessage) -> tuple[str | None, str]:
        return self.private_keys.invalid(body, error)

    def tenant(self, job: ParsedJob) -> str | None:
        # A tenant name is often a customer's: outside SES's request it travels as its digest, like a key.
        return tenant_label(job.tenant, self.private_keys.digest)


def _key_text(body: str) -> str | None:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    key = document.get(DEDUPE_KEY) if isinstance(document, dict) else None
    return key if isinstance(key, str) and key else None
