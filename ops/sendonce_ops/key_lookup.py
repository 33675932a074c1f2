"""With key_privacy, the ledger knows a key only as its keyed digest: the operator types the clear key, and this
turns it into the record's key with the pipeline's secret (read once, kept in memory, never printed)."""

from __future__ import annotations

import boto3

from sendonce_contract.key_digest import is_digest, key_digest

from .locate import Pipeline


def ledger_key(pipeline: Pipeline, key: str) -> str:
    """The ledger's key for ``key``: its digest when the pipeline has a key secret. A digest given as it is (as
    `sendonce unknown` lists them) is taken as it is."""
    if pipeline.key_secret is None or is_digest(key):
        return key
    secret = boto3.client("secretsmanager").get_secret_value(SecretId=pipeline.key_secret)["SecretString"]
    return key_digest(secret.encode("utf-8"), key)
