"""AWS prices the report puts on measured figures (us-east-1, assumed: check current pricing), and DynamoDB's item
size formula."""

from __future__ import annotations

from typing import Any

WRITE_PRICE_PER_MILLION = 0.625  # USD per million on-demand write request units, us-east-1 (assumption; check)
STORAGE_PRICE_PER_GB_MONTH = 0.25  # USD, us-east-1 standard table class (assumption; check)
ITEM_OVERHEAD_BYTES = 100  # DynamoDB's per-item storage overhead
SQS_PRICE_PER_MILLION = 0.40  # USD per million standard-queue requests, first tier (assumption; check)
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
