"""The transactional outbox: record the intent to send in the same DynamoDB transaction as the change causing it."""

from __future__ import annotations

import time
from typing import Any

from .job import EmailJob

# How long an outbox item stays (the relay reads it from the stream within seconds; TTL only tidies up).
OUTBOX_TTL_S = 2 * 86_400


def outbox_put(table_name: str, job: EmailJob, *, group_id: str | None = None) -> dict[str, Any]:
    """The ``TransactWriteItems`` entry that writes ``job`` to the outbox table.

    Add it to the transaction of your business write. The relay moves it to the job queue from the table's
    stream. A second write of the same job fails the condition (and so the whole transaction) instead of
    enqueuing it twice; a retried transaction that had committed is refused the same way.
    """
    item: dict[str, Any] = {
        "dedupeKey": {"S": job.dedupe_key},
        "job": {"S": job.to_message()},
        "createdAt": {"N": str(time.time_ns() // 1_000_000)},
        "expiresAt": {"N": str(int(time.time()) + OUTBOX_TTL_S)},
    }
    if group_id is not None:
        item["groupId"] = {"S": group_id}
    return {
        "Put": {
            "TableName": table_name,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(dedupeKey)",
        }
    }
