"""How a record that is not done comes back: sooner than the visibility timeout when its wait is known, as a
delayed copy when waiting must not spend the receive budget meant for poison messages, and into the DLQ with its
reason, never silently, when that budget is spent.

- Waiting for SES's events: the message becomes visible again when the grace period ends.
- Throttled by SES: on a standard queue a copy of the job is sent with a short, jittered, growing delay and the
  original acknowledged, so throttling never pushes a job toward the DLQ (the copy starts with a fresh receive
  count; the ledger makes a duplicate copy harmless). On a FIFO queue, where a copy would lose its place in the
  group, the message becomes visible again after the same delay.
- No send slot left in this invocation (the pipeline's own pacing): the same, after one to three seconds, without
  growing: the job was not refused, it only waits its turn.
- Another worker holds the key (a copy of the job in flight elsewhere): the same, after a few seconds (at most until
  that worker's lease ends), by when it has usually finished and this copy is a duplicate. On a FIFO queue the
  message becomes visible again when the lease ends.
- SES's daily quota exhausted: the same, delayed about ten minutes, as SES's documentation advises.
- A job whose ``sendAt`` is ahead: a delayed copy for the time left, at most SQS's 15 minutes a copy, as often as
  it takes; nothing is claimed meanwhile, so the key can still be cancelled.
- A job of a newer contract version than this consumer knows (a producer upgraded before its consumer): the same,
  delayed about five minutes, the time a deploy takes, so a rolling upgrade never dead-letters a job.
- A record that would fail on the last receive its queue allows is dead-lettered with the reason, instead of
  moved by SQS with none.
"""

from __future__ import annotations

import random
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.schema import DeadLetter, ReasonCode

from .dead_letter import DeadLetterQueue
from .outcome import Outcome, RecordResult
from .sqs_record import SqsRecord

SQS_MAX_VISIBILITY_S = 43_200
SQS_MAX_DELAY_S = 900
THROTTLE_BASE_DELAY_S = 2.0
QUOTA_DELAY_S = 600.0  # "wait for an interval of up to 10 minutes" (SES, errors related to sending quotas)
CONTRACT_TOO_NEW_DELAY_S = 300.0  # about the time a deploy of the upgraded consumer takes
# Outcomes whose job comes back as a delayed copy on a standard queue.
POSTPONED = frozenset({Outcome.THROTTLED, Outcome.QUOTA_EXHAUSTED, Outcome.PACED, Outcome.IN_FLIGHT_ELSEWHERE,
                       Outcome.SCHEDULED, Outcome.CONTRACT_TOO_NEW})


class Redelivery:
    def __init__(
        self,
        client: Any,
        queue_url: str | None,
        fifo: bool,
        dead_letters: DeadLetterQueue,
        max_receive_count: int | None,
        rng: random.Random | None = None,
    ) -> None:
        self._client = client
        self._queue_url = queue_url
        self._fifo = fifo
        self._dead_letters = dead_letters
        self._max_receive_count = max_receive_count
        self._random = rng or random.Random()

    def settle(self, record: SqsRecord, result: RecordResult) -> RecordResult:
        """``result``, or what it became once its way back is arranged. Never raises."""
        if not result.redeliver:
            return result
        if result.outcome in POSTPONED:
            delay_s = self.postponement_s(result.outcome, record.postponements)
            if result.outcome is Outcome.IN_FLIGHT_ELSEWHERE and result.retry_after_s is not None:
                delay_s = min(delay_s, result.retry_after_s)
            if result.outcome is Outcome.SCHEDULED and result.retry_after_s is not None:
                delay_s = min(SQS_MAX_DELAY_S, result.retry_after_s)  # each copy waits at most 15 minutes
            counted = record.postponements + (result.outcome in (Outcome.THROTTLED, Outcome.QUOTA_EXHAUSTED))
            if not self._fifo and self._send_copy(record, delay_s, counted):
                return result._replace(postponed_s=delay_s)
            result = result._replace(retry_after_s=result.retry_after_s or delay_s)
        if self._max_receive_count is not None and record.receive_count >= self._max_receive_count:
            return self._give_up(record, result)
        if result.retry_after_s is not None:
            self._change_visibility(record, result.retry_after_s)
        return result

    def postponement_s(self, outcome: Outcome, postponements: int) -> int:
        """Full jitter over a doubling delay, so a burst's throttled jobs spread out instead of coming back at once."""
        if outcome is Outcome.QUOTA_EXHAUSTED:
            return int(QUOTA_DELAY_S * (1 + 0.5 * self._random.random()))
        if outcome is Outcome.CONTRACT_TOO_NEW:
            return int(CONTRACT_TOO_NEW_DELAY_S * (1 + 0.5 * self._random.random()))
        if outcome is Outcome.PACED:
            return 1 + int(2 * self._random.random() + 0.5)
        if outcome is Outcome.IN_FLIGHT_ELSEWHERE:
            return 2 + int(3 * self._random.random() + 0.5)
        ceiling = min(SQS_MAX_DELAY_S, THROTTLE_BASE_DELAY_S * 2 ** min(postponements, 10))
        return max(1, int(ceiling * (0.5 + 0.5 * self._random.random())))

    def _send_copy(self, record: SqsRecord, delay_s: int, postponements: int) -> bool:
        if self._queue_url is None:
            return False
        attributes = {name: {"DataType": kind, "StringValue": value}
                      for name, kind, value in record.message_attributes if name != DeadLetter.POSTPONEMENTS}
        attributes[DeadLetter.POSTPONEMENTS] = {"DataType": "Number", "StringValue": str(postponements)}
        try:
            self._client.send_message(QueueUrl=self._queue_url, MessageBody=record.body,
                                      DelaySeconds=min(delay_s, SQS_MAX_DELAY_S), MessageAttributes=attributes)
        except (ClientError, BotoCoreError):
            return False
        return True

    def _change_visibility(self, record: SqsRecord, seconds: int) -> None:
        # A failure here costs only time: the message comes back after its visibility timeout anyway.
        if self._queue_url is None or not record.receipt_handle:
            return
        try:
            self._client.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=record.receipt_handle,
                VisibilityTimeout=max(1, min(seconds, SQS_MAX_VISIBILITY_S)),
            )
        except (ClientError, BotoCoreError):
            return

    def _give_up(self, record: SqsRecord, result: RecordResult) -> RecordResult:
        reason = (f"received {record.receive_count} times, the queue's max_receive_count; the last attempt was "
                  f"{result.outcome.value}: {result.reason or 'no reason given'}")
        if self._dead_letters.send(record, ReasonCode.MAX_RECEIVES, reason, result.dedupe_key):
            return result._replace(outcome=Outcome.RECEIVES_EXHAUSTED, reason=reason,
                                   dead_letter_reason=ReasonCode.MAX_RECEIVES.value)
        return result
