"""While SES stops a lane's whole sending (the account's), an invocation handed fewer than ten records takes the
rest of ten from its own queue, so its parked jobs are copied ten to a request (``Redelivery.park``).

Why: a lane paced at one email a second an instance has batches of one, and a parked job there costs five SQS
requests per 15 minutes (its receive, hold, copy, the copy's delete of it and Lambda's delete), against the half
of one it costs in a batch of ten. Only while the account's sending is stopped: then the lane sends nothing but its
probe once a minute, so a larger batch holds no job back from its turn at the rate. With only a tenant stopped, the
other tenants' jobs would be received ahead of their turn, and are not taken.

The messages taken are the consumer's to acknowledge, as Lambda acknowledges those it hands over: deleted when done
(ten to a request), left to come back (by their delayed copy, or their visibility) when not. A taken message whose
invocation dies comes back after the queue's visibility timeout, as one of Lambda's would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.sqs_limits import SQS_MAX_BATCH_ENTRIES

from .clock import Deadline
from .outcome import RecordResult
from .redelivery import CALLS_AFTER_PARKING, PARK_CALLS
from .sqs_answers import call_batched
from .sqs_record import SqsRecord

# The calls a topped-up batch makes before its deadline: the receive, its parked jobs' (ten, one batch SQS takes
# whole, at the least), and the delete of what was done.
TOP_UP_CALLS = 1 + PARK_CALLS + CALLS_AFTER_PARKING


class TopUp:
    def __init__(self, client: Any, queue_url: str, stopped: Callable[[], bool], call_ms: int) -> None:
        self._client = client
        self._queue_url = queue_url
        self._stopped = stopped  # whether this instance knows the lane's whole sending stopped
        self._call_ms = call_ms  # the longest one SQS call can take

    def take(self, batch: Sequence[SqsRecord], deadline: Deadline) -> list[SqsRecord]:
        """Up to ten minus the batch's records from the queue, while the account's sending is stopped; none when
        the batch is full, sending goes on, or the deadline leaves no room. Never raises."""
        wanted = SQS_MAX_BATCH_ENTRIES - len(batch)
        if wanted <= 0 or not batch or not self._stopped() or deadline.remaining_ms() < TOP_UP_CALLS * self._call_ms:
            return []
        try:
            # Out of sight only for the rest of the invocation, not the queue's visibility timeout: a taken copy
            # whose receive answer was lost, or whose invocation dies, comes back before the original it replaces
            # (held for a minute past the copy's delay), so it never outlives it. A taken record's copy holds it.
            messages = self._client.receive_message(
                QueueUrl=self._queue_url, MaxNumberOfMessages=wanted, WaitTimeSeconds=0,
                VisibilityTimeout=-(-deadline.remaining_ms() // 1000) + 1,
                MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
        except (ClientError, BotoCoreError):
            return []  # the batch goes on as handed over
        return [SqsRecord.from_message(message, batch[0].event_source_arn) for message in messages]

    def acknowledge(self, taken: Sequence[SqsRecord], results: Sequence[RecordResult], deadline: Deadline) -> None:
        """Delete the taken messages that are done, as Lambda deletes its batch's, with time for the call. Never
        raises: one left behind is deleted by its copy, or comes back and is acknowledged as the duplicate it is."""
        entries = {str(n): {"ReceiptHandle": record.receipt_handle}
                   for n, (record, result) in enumerate(zip(taken, results, strict=True)) if not result.redeliver}
        if entries and deadline.remaining_ms() >= self._call_ms:
            call_batched(self._client.delete_message_batch, self._queue_url, entries)
