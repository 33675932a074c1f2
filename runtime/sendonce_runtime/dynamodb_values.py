"""DynamoDB's low-level shapes, written once: an attribute value from a Python value, what a conditional write
that failed says (its error code, and the item it found: ``ReturnValuesOnConditionCheckFailure``), and a batch
write (its size, and its unprocessed requests sent once more)."""

from __future__ import annotations

import contextlib
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .aws_errors import error_code

CONDITION_FAILED = "ConditionalCheckFailedException"
MAX_BATCH_WRITES = 25  # the puts or deletes one BatchWriteItem carries at most


def string(value: str) -> dict[str, str]:
    return {"S": value}


def number(value: int) -> dict[str, str]:
    return {"N": str(value)}


def condition_failed(error: ClientError) -> bool:
    return error_code(error) == CONDITION_FAILED


def found_item(error: ClientError) -> dict[str, Any] | None:
    """The item a failed conditional write found, None when there was none."""
    item = error.response.get("Item")
    return item if isinstance(item, dict) else None


def write_batch(client: Any, table: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``BatchWriteItem`` of at most ``MAX_BATCH_WRITES`` puts or deletes, the requests DynamoDB left
    unprocessed sent once more: those still left. A failure of the first call raises (nothing is known written);
    of the second, the first's unprocessed requests are what is left."""
    left = client.batch_write_item(RequestItems={table: requests}).get("UnprocessedItems", {}).get(table, [])
    if left:
        with contextlib.suppress(ClientError, BotoCoreError):
            left = client.batch_write_item(RequestItems={table: left}).get("UnprocessedItems", {}).get(table, [])
    return list(left)
