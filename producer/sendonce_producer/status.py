"""What became of an email, read by the application from the pipeline's dedupe table.

The same codec as the operator command's (:class:`sendonce_contract.record.EmailRecord`): the state of the key, the
SES message ids, what SES's events said (delivered, bounced, complained, ... with their times) and whether a second
email was seen. Grant the reader with ``SendOnceEmailQueue.grant_status_read(role)`` (``dynamodb:GetItem``).
"""

from __future__ import annotations

import time
from typing import Any

from sendonce_contract.record import EmailRecord, SesOutcome
from sendonce_contract.schema import Ledger

from .private_keys import ledger_key

__all__ = ["EmailRecord", "SesOutcome", "status"]


def _client(dynamodb: Any | None) -> Any:
    if dynamodb is not None:
        return dynamodb
    import boto3

    return boto3.client("dynamodb")


def status(table_name: str, key: str, *, key_secret_arn: str | None = None, dynamodb: Any | None = None,
           secretsmanager: Any | None = None) -> EmailRecord | None:
    """The record of ``key``, or None when the pipeline never claimed it or has forgotten it (past ``dedupe_ttl``,
    when the next delivery of its job would send it again). A strongly consistent read. With the pipeline's
    ``key_privacy``, pass its ``key_secret`` ARN: the record's key is then the digest."""
    stored = ledger_key(key, key_secret_arn, secretsmanager)
    item = _client(dynamodb).get_item(TableName=table_name, Key={Ledger.KEY: {"S": stored}}, ConsistentRead=True)
    if "Item" not in item:
        return None
    record = EmailRecord.from_item(item["Item"])
    return None if record.expired(time.time_ns() // 1_000_000) else record
