"""AWS prices the report puts on measured figures (us-east-1, assumed: check current pricing), and DynamoDB's item
size formula."""

from __future__ import annotations

from typing import Any

WRITE_PRICE_PER_MILLION = 0.625  # USD per million on-demand write request units, us-east-1 (assumption; check)
STORAGE_PRICE_PER_GB_MONTH = 0.25  # USD, us-east-1 standard table class (assumption; check)
ITEM_OVERHEAD_BYTES = 100  # DynamoDB's per-item storage overhead
SQS_PRICE_PER_MILLION = 0.40  # USD per million standard-queue requests, first tier (assumption; check)
# SQS pricing: "each 64 KB chunk of a payload is billed as 1 request" (an API action with a 256 KB payload is billed
# as 4 requests), whether the action sends the payload or receives it.
SQS_BILLED_CHUNK_BYTES = 64 * 1024
# S3 pricing, S3 Standard, us-east-1:
S3_PUT_PRICE_PER_MILLION = 5.00  # USD: PUT, COPY, POST, LIST at $0.005 per 1,000 requests (assumption; check)
S3_GET_PRICE_PER_MILLION = 0.40  # USD: GET, SELECT at $0.0004 per 1,000 requests (assumption; check)
S3_STORAGE_PRICE_PER_GB_MONTH = 0.023  # USD, the first 50 TB a month (assumption; check)
HOURS_PER_MONTH = 730  # how AWS's pricing turns byte-hours into GB-months
LAMBDA_REQUEST_PRICE_PER_MILLION = 0.20  # USD (assumption; check)
LAMBDA_GB_SECOND_PRICE = 0.0000133334  # USD, arm64 (assumption; check)
RECORDER_MS_PER_INVOCATION = 60  # billed duration assumed for a batch of ten UpdateItems
EVENTS_PRICE_PER_MILLION = 1.00  # USD per million EventBridge custom events put on a bus (assumption; check)


def item_bytes(item: dict[str, Any]) -> int:
    """DynamoDB's item size: attribute names plus values (numbers take about one byte per two digits, plus one)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if "S" in value:
            size += len(value["S"].encode())
        elif "N" in value:
            size += (len(value["N"].lstrip("-").replace(".", "")) + 1) // 2 + 1
    return size


def sqs_billed_requests(payload_bytes: int) -> int:
    """What one SQS request carrying ``payload_bytes`` is billed as: one request per 64 KB chunk, at least one."""
    return max(1, -(-payload_bytes // SQS_BILLED_CHUNK_BYTES))
