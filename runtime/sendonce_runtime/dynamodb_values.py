"""DynamoDB's low-level shapes, written once: an attribute value from a Python value, what a conditional write
that failed says (its error code, and the item it found: ``ReturnValuesOnConditionCheckFailure``), and a batch's
size."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

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
