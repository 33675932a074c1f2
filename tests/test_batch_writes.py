"""A batch write meets a throttled table as DynamoDB answers it, with some requests left unprocessed: they are sent
once more, and what is still left is said, never taken for written. Against the emulator's table behind a proxy
that plays a throttled BatchWriteItem (``UNPROCESSED``: each table's first request carried out, the rest left)."""

from __future__ import annotations

import boto3
from botocore.config import Config

from sendonce_local.emulator.slow_services import UNPROCESSED, Rule
from sendonce_runtime.dynamodb_values import string, write_batch


def keys_in(table: str) -> set[str]:
    items = boto3.client("dynamodb").scan(TableName=table)["Items"]
    return {item["dedupeKey"]["S"] for item in items if item["dedupeKey"]["S"].startswith("batch:")}


def test_unprocessed_requests_are_sent_once_more_and_those_still_left_come_back(pipeline, slow):
    client = boto3.client("dynamodb", endpoint_url=slow.endpoint)
    puts = [{"PutRequest": {"Item": {"dedupeKey": string(f"batch:{n}")}}} for n in range(4)]
    slow.fault(Rule("dynamodb", "BatchWriteItem", UNPROCESSED))

    left = write_batch(client, pipeline.table_name, puts)

    # The first call took one, the second one more of the three left: two come back, and only they are absent.
    assert left == puts[2:]
    assert keys_in(pipeline.table_name) == {"batch:0", "batch:1"}
    assert slow.hits["dynamodb", "BatchWriteItem", UNPROCESSED] == 2  # once more, not until done
    slow.clear()
    assert write_batch(client, pipeline.table_name, left) == []
    assert keys_in(pipeline.table_name) == {f"batch:{n}" for n in range(4)}


def test_a_batch_write_whose_second_call_fails_says_what_the_first_left(pipeline, slow):
    client = boto3.client("dynamodb", endpoint_url=slow.endpoint, config=Config(retries={"total_max_attempts": 1}))
    deletes = [{"DeleteRequest": {"Key": {"dedupeKey": string(f"batch:{n}")}}} for n in range(3)]
    for n in range(3):
        boto3.client("dynamodb").put_item(TableName=pipeline.table_name, Item={"dedupeKey": string(f"batch:{n}")})
    slow.fault(Rule("dynamodb", "BatchWriteItem", UNPROCESSED), for_s=3600)
    answered: list[int] = []

    def refuse_the_second(**_: object) -> None:
        answered.append(1)
        if len(answered) == 1:  # the first answered: the second is refused
            slow.fault(Rule("dynamodb", "BatchWriteItem", "ProvisionedThroughputExceededException"))

    client.meta.events.register("after-call.dynamodb.BatchWriteItem", refuse_the_second)
    assert write_batch(client, pipeline.table_name, deletes) == deletes[1:]
    assert keys_in(pipeline.table_name) == {"batch:1", "batch:2"}
    assert slow.hits["dynamodb", "BatchWriteItem", "ProvisionedThroughputExceededException"] == 1
