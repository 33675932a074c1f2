"""``Email Dead-Lettered`` outcome events: the consumer publishes one for each keyed job it moved to the DLQ.

A dead letter is no ledger transition (a refused key has no record left), so it cannot come from the table's
stream: the consumer puts the batch's events on EventBridge once the batch is done, in one PutEvents call, and
tries once more while the deadline allows. What still fails is counted (``OutcomeEventsFailed``), never retried
at the batch's expense: the message itself is safe in the DLQ with its reason.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.outcome_events import OutcomeEvent, dead_lettered

from .clock import Clock, Deadline
from .outcome import RecordResult

LOGGER = logging.getLogger("sendonce")
PUT_EVENTS_BATCH = 10
TRIES = 2
# Publishing must leave the invocation time to return its batch response.
SPARE_MS = 1_000


class DeadLetterEvents:
    def __init__(self, client: Any, bus: str, pipeline_tag: str, clock: Clock) -> None:
        self._client = client
        self._bus = bus
        self._pipeline = pipeline_tag
        self._clock = clock

    def publish(self, results: Sequence[RecordResult], deadline: Deadline) -> int:
        """Publish an event per dead-lettered keyed job; returns how many could not be published."""
        now_ms = self._clock.now_ms()
        pending = [dead_lettered(r.dedupe_key, self._pipeline, code.value, r.reason, r.message_id, now_ms, r.tenant)
                   for r in results if (code := r.dead_letter_reason) is not None and r.dedupe_key is not None]
        failed = 0
        for start in range(0, len(pending), PUT_EVENTS_BATCH):
            failed += len(self._put(pending[start : start + PUT_EVENTS_BATCH], deadline))
        if failed:
            LOGGER.warning("%d dead-lettered outcome events could not be published", failed)
        return failed

    def _put(self, chunk: list[OutcomeEvent], deadline: Deadline) -> list[OutcomeEvent]:
        for _ in range(TRIES):
            if not chunk or deadline.remaining_ms() < SPARE_MS:
                break
            try:
                response = self._client.put_events(Entries=[event.entry(self._bus) for event in chunk])
            except (ClientError, BotoCoreError):
                continue
            results = response.get("Entries", [])
            chunk = [e for e, r in zip(chunk, results, strict=False) if r.get("ErrorCode")] + chunk[len(results):]
        return chunk
