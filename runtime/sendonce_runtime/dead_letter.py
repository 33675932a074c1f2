"""Moves a message that can never be sent to the dead-letter queue, with the reason attached."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.schema import DeadLetter, ReasonCode

from .aws_errors import never_sent
from .sqs_record import SqsRecord

MAX_REASON_CHARS = 1024


class DeadLetterQueue:
    def __init__(self, client: Any, queue_url: str, fifo: bool) -> None:
        self._client = client
        self._url = queue_url
        self._fifo = fifo

    def send(self, record: SqsRecord, reason_code: ReasonCode, reason: str, dedupe_key: str | None) -> bool:
        """Copy the original body to the DLQ; False if SQS surely did not take it (the caller then leaves the
        message queued), True if it did or may have."""
        attributes = {
            DeadLetter.REASON_CODE: reason_code.value,
            DeadLetter.REASON: reason[:MAX_REASON_CHARS],
            DeadLetter.SOURCE_MESSAGE_ID: record.message_id,
            DeadLetter.SOURCE_QUEUE: record.event_source_arn or "unknown",
            DeadLetter.RECEIVE_COUNT: str(record.receive_count),
        }
        if dedupe_key:
            attributes[DeadLetter.DEDUPE_KEY] = dedupe_key
        request: dict[str, Any] = {
            "QueueUrl": self._url,
            "MessageBody": record.body,
            "MessageAttributes": {
                name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
            },
        }
        if self._fifo:
            request["MessageGroupId"] = record.message_group_id or "sendonce-dead-letters"
            request["MessageDeduplicationId"] = record.message_id
        elif record.message_group_id:  # a standard queue's tenant: a redrive gives it back to the job
            request["MessageGroupId"] = record.message_group_id
        try:
            self._client.send_message(**request)
        except (ClientError, BotoCoreError) as error:
            # An answer lost on the way back means SQS may hold it: the caller acknowledges the original, or
            # SQS's redrive would move it a second time, without a reason.
            return not never_sent(error)
        return True
