"""Moves a message that can never be sent to the dead-letter queue, with the reason attached."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.schema import DeadLetter, ReasonCode

from .sqs_record import SqsRecord

MAX_REASON_CHARS = 1024


class DeadLetterQueue:
    def __init__(self, client: Any, queue_url: str, fifo: bool) -> None:
        self._client = client
        self._url = queue_url
        self._fifo = fifo

    def send(self, record: SqsRecord, reason_code: ReasonCode, reason: str, dedupe_key: str | None) -> bool:
        """Copy the original body to the DLQ; True once SQS says it took it, else False and the caller leaves the
        message queued: it comes back and is dead-lettered again."""
        attributes = {
            DeadLetter.REASON_CODE: reason_code.value,
            DeadLetter.REASON: reason[:MAX_REASON_CHARS],
            DeadLetter.SOURCE_MESSAGE_ID: record.message_id,
            DeadLetter.SOURCE_QUEUE: record.event_source_arn or "unknown",
            DeadLetter.RECEIVE_COUNT: str(record.receive_count),
        }
        if dedupe_key:
            attributes[DeadLetter.DEDUPE_KEY] = dedupe_key
        if record.first_queued_at is not None:  # kept by a redrive: a lane's age limit counts from it
            attributes[DeadLetter.FIRST_QUEUED_AT] = str(record.first_queued_at)
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
        except (ClientError, BotoCoreError):
            # An answer lost on the way back (a timeout, a 5xx) is not done either: SQS may never have stored it. A
            # second entry in the DLQ is harmless (a redrive dedupes); an original acknowledged with none is lost.
            return False
        return True
