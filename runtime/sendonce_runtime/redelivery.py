"""Brings a record back when it can be decided, instead of after the whole visibility timeout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .outcome import RecordResult
from .sqs_record import SqsRecord

SQS_MAX_VISIBILITY_S = 43_200


class Redelivery:
    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def schedule(self, records: Sequence[SqsRecord], results: Sequence[RecordResult]) -> None:
        """Set the visibility of each failed record that asked for a time. A failure here costs nothing but time:
        the message comes back after its visibility timeout as it would anyway."""
        handles = {record.message_id: record.receipt_handle for record in records}
        for result in results:
            handle = handles.get(result.message_id)
            if result.retry_after_s is None or not result.outcome.redeliver or not handle:
                continue
            try:
                self._client.change_message_visibility(
                    QueueUrl=self._queue_url, ReceiptHandle=handle,
                    VisibilityTimeout=max(1, min(result.retry_after_s, SQS_MAX_VISIBILITY_S)),
                )
            except (ClientError, BotoCoreError):
                continue
