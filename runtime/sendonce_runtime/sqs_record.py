"""One record of an SQS event, as the consumer needs it."""

from __future__ import annotations

from typing import Any, NamedTuple


class SqsRecord(NamedTuple):
    message_id: str
    body: str
    receive_count: int
    message_group_id: str | None
    event_source_arn: str
    receipt_handle: str = ""

    @classmethod
    def from_event(cls, record: dict[str, Any]) -> SqsRecord:
        attributes = record.get("attributes") or {}
        return cls(
            message_id=str(record["messageId"]),
            body=str(record.get("body", "")),
            receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
            message_group_id=attributes.get("MessageGroupId"),
            event_source_arn=str(record.get("eventSourceARN", "")),
            receipt_handle=str(record.get("receiptHandle", "")),
        )
