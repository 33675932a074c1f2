"""With the pipeline's ``key_privacy``, its ledger knows a key only as its keyed digest: ``status`` and ``cancel``
take the clear key and digest it with the pipeline's secret (read once per secret, kept in memory, never shown), and
a job's ``tenant`` travels as the queue's ``MessageGroupId`` only as its digest. Grant the reader (and, for
tenants, every producer and relay) ``secretsmanager:GetSecretValue`` on ``receipts.key_secret``."""

from __future__ import annotations

import threading
from typing import Any

from sendonce_contract.key_digest import KeyDigester, is_digest

_lock = threading.Lock()
_digesters: dict[str, KeyDigester] = {}


def ledger_key(key: str, key_secret_arn: str | None, secretsmanager: Any | None = None) -> str:
    """The ledger's key for ``key``: itself without a key secret, else its digest (a digest is taken as it is)."""
    digest = digester(key_secret_arn, secretsmanager)
    if digest is None or is_digest(key):
        return key
    return digest(key)


def digester(key_secret_arn: str | None, secretsmanager: Any | None = None) -> KeyDigester | None:
    """The pipeline's key digester (None without a key secret), the secret read once per ARN."""
    if key_secret_arn is None:
        return None
    with _lock:
        if key_secret_arn not in _digesters:
            if secretsmanager is None:
                import boto3

                secretsmanager = boto3.client("secretsmanager")
            secret = secretsmanager.get_secret_value(SecretId=key_secret_arn)["SecretString"]
            _digesters[key_secret_arn] = KeyDigester(secret.encode("utf-8"))
        return _digesters[key_secret_arn]
