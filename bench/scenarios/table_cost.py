"""6. The dedupe table's cost: a SENT record, measured (priced on paper by the report)."""

from __future__ import annotations

import uuid
from typing import Any

import boto3
from consumers import factory

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record


def sent_item(names: dict[str, str]) -> dict[str, Any]:
    handler, _ = factory("sendonce", names)()
    key = f"receipt:{uuid.uuid4().hex[:6]}:u42"
    handler({"Records": [record(job(key))]}, Context())
    return dict(boto3.client("dynamodb").get_item(TableName=names["ours"], Key={"dedupeKey": {"S": key}})["Item"])
