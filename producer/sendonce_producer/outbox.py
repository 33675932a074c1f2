"""The transactional outbox: record the intent to send in the same DynamoDB transaction as the change causing it."""

from __future__ import annotations

import time
from typing import Any

from sendonce_contract.schema import OutboxItem

from .job import EmailJob

# How long an outbox item stays (the relay reads it from the stream within seconds; TTL only tidies up).
OUTBOX_TTL_S = 2 * 86_400


def outbox_put(
    table_name: str, job: EmailJob, *, group_id: str | None = None, fail_if_exists: bool = False
) -> dict[str, Any]:
    """The ``TransactWriteItems`` entry that writes ``job`` to the outbox table.

    Add it to the transaction of your business write; the relay moves it to the job queue from the table's
    stream. By default a job whose key is already in the outbox is left as it is and the transaction commits,
    like SQL's ``INSERT ... ON CONFLICT (dedupe_key) DO NOTHING``: your business change is never cancelled by a
    duplicate email intent, and an unchanged item writes no stream record, so nothing is relayed twice.
    ``fail_if_exists=True`` makes the duplicate cancel the whole transaction instead (TransactionCanceledException
    with a ConditionalCheckFailed reason), for callers who want to see the conflict.
    """
    values: dict[str, Any] = {
        OutboxItem.JOB: {"S": job.to_message()},
        OutboxItem.CREATED_AT: {"N": str(time.time_ns() // 1_000_000)},
        OutboxItem.EXPIRES_AT: {"N": str(int(time.time()) + OUTBOX_TTL_S)},
    }
    if group_id is not None:
        values[OutboxItem.GROUP_ID] = {"S": group_id}
    key = {OutboxItem.KEY: {"S": job.dedupe_key}}
    if fail_if_exists:
        return {"Put": {"TableName": table_name, "Item": {**key, **values},
                        "ConditionExpression": f"attribute_not_exists({OutboxItem.KEY})"}}
    # Each attribute is set only where the item has none: a new key is written whole (an INSERT the relay sends),
    # an existing one is not changed at all.
    names = {f"#{name}": name for name in values}
    assignments = ", ".join(f"#{name} = if_not_exists(#{name}, :{name})" for name in values)
    return {
        "Update": {
            "TableName": table_name,
            "Key": key,
            "UpdateExpression": f"SET {assignments}",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {f":{name}": value for name, value in values.items()},
        }
    }
