"""Take an email back before it is sent (see :mod:`sendonce_contract.cancellation` for the guarantee)."""

from __future__ import annotations

import time
import warnings
from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.cancellation import CANCEL_LASTS, Cancellation, refused, tombstone_request, written

from .private_keys import ledger_key

__all__ = ["Cancellation", "cancel"]


def cancel(table_name: str, key: str, *, key_secret_arn: str | None = None, dynamodb: Any | None = None,
           secretsmanager: Any | None = None, dedupe_ttl_s: int | None = None) -> Cancellation:
    """Cancel the email of ``key``: ``cancelled`` says whether it was in time, ``explanation`` says it in words.

    A cancelled key stays cancelled longer than any copy of its job can still arrive (88 days), whatever the
    pipeline's ``dedupe_ttl`` and the job's ``sendAt``. Cancelling a cancelled key reports it cancelled. Grant the
    caller with ``SendOnceEmailQueue.grant_cancel(role)``. With the pipeline's ``key_privacy``, pass its
    ``key_secret`` ARN. ``dedupe_ttl_s`` is deprecated and ignored.
    """
    if dedupe_ttl_s is not None:
        warnings.warn(f"cancel(dedupe_ttl_s=...) is ignored: {CANCEL_LASTS}", DeprecationWarning, stacklevel=2)
    key = ledger_key(key, key_secret_arn, secretsmanager)
    if dynamodb is None:
        import boto3

        dynamodb = boto3.client("dynamodb")
    while True:
        request = tombstone_request(table_name, key, time.time_ns() // 1_000_000)
        try:
            dynamodb.put_item(**request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            existing: dict[str, Any] | None = error.response.get("Item")  # type: ignore[assignment]
            if existing:  # else it was deleted in between (a released claim): write again
                return refused(existing)
            continue
        return written(request)
