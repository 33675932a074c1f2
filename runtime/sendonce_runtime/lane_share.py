"""The urgent lane's share of the send rate, and its loan to the bulk lane while the urgent lane is idle.

With ``urgent_lane`` and a ``send_rate`` R, the urgent lane's consumer paces each of its instances at
``urgent_share`` x R / its instances, always: bulk never takes that share. Each bulk instance has two buckets
(``send_rate.TokenBucket``): its own, at (1 - ``urgent_share``) x R / the instances the bulk lane runs, and the
loan, at ``urgent_share`` x R over those same instances, taken from only while the urgent queue holds no message
(visible, in flight or delayed): then the bulk lane alone sends at R.

The urgent lane is watched where its work is: its queue's counts (one ``GetQueueAttributes`` per bulk instance at
most once a second), so a bulk instance gives the share back when an urgent job is enqueued, before the urgent
lane has received it, and no write is made for it (nothing in the ledger, its stream or its outcome events).
A bulk instance overruns the urgent share for at most ``WATCH_PERIOD_S`` plus one token's wait after SQS counts
an urgent job, and lends it again once no read found urgent work for ``URGENT_IDLE_AFTER_S``; a failed read
counts as busy, so a fault only ever keeps bulk to its own share.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .clock import Deadline
from .send_rate import Slot, TokenBucket
from .ses_sender import Refused, SendOutcome

WATCH_PERIOD_S = 1.0  # how long a bulk instance trusts what it last read of the urgent queue
# The urgent lane counts as idle, and its share is lent, once no read has found work for this long: a lane whose
# jobs come a few seconds apart is in use, not idle. Lent between them, bulk would send at SES's whole rate when
# each next one came, before its watch could see it, and SES would throttle that job or a bulk one; kept to its
# own share meanwhile, SES's second's worth builds up again for the urgent lane's next first send.
URGENT_IDLE_AFTER_S = 5.0
# Every message the urgent queue holds: waiting, received and not yet deleted, and delayed (a paced copy).
URGENT_WORK_ATTRIBUTES = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                          "ApproximateNumberOfMessagesDelayed")


# An urgent send SES throttles is tried again in its invocation, this often and for this long at most (then it
# waits as a delayed copy, as any throttled job). Bulk lends itself the urgent share while the urgent queue looks
# empty, and reads it once a second: the urgent lane's first sends after idling come before bulk can see them, and
# while bulk sends at SES's whole rate SES throttles them. Held in flight, the job is counted in the urgent queue,
# so bulk gives the share back within its watch's period and a slot: a try a quarter of a second apart then gets
# the email out within about that, where a delayed copy came back 1 to 4 s later.
URGENT_RETRY_PAUSE_S = 0.25
URGENT_RETRY_PATIENCE_S = 2 * WATCH_PERIOD_S


class UrgentThrottleRetry:
    """An urgent send, tried again while SES throttles it: after each pause, if the record's budget still fits
    after it and the pauses so far stay within ``patience_s``."""

    def __init__(self, record_budget_ms: int, sleep: Callable[[float], None] = time.sleep,
                 pause_s: float = URGENT_RETRY_PAUSE_S, patience_s: float = URGENT_RETRY_PATIENCE_S) -> None:
        self._record_budget_ms, self._sleep = record_budget_ms, sleep
        self._pause_s, self._patience_s = pause_s, patience_s

    def send(self, send_once: Callable[[], SendOutcome], deadline: Deadline) -> SendOutcome:
        """``send_once``'s outcome, tried again after each throttle while the patience and the deadline allow
        (SES took nothing: the claim is still the record's, and nothing was sent)."""
        outcome, waited_s = send_once(), 0.0
        while isinstance(outcome, Refused) and outcome.retryable and outcome.stop is None:
            waited_s += self._pause_s
            if waited_s > self._patience_s + 1e-9 or deadline.remaining_ms() - self._pause_s * 1000 < \
                    self._record_budget_ms:
                break
            self._sleep(self._pause_s)
            outcome = send_once()
        return outcome


class UrgentLaneWatch:
    """Whether the urgent lane has work, or had within ``idle_after_s``, read from its queue at most once per
    ``period_s`` per instance; threads that ask while one reads get the last answer."""

    def __init__(self, sqs: Any, urgent_queue_url: str, period_s: float = WATCH_PERIOD_S,
                 monotonic: Callable[[], float] = time.monotonic, idle_after_s: float = URGENT_IDLE_AFTER_S) -> None:
        self._sqs, self._url, self._period_s, self._monotonic = sqs, urgent_queue_url, period_s, monotonic
        self._idle_after_s = idle_after_s
        self._busy = True  # until the first read says otherwise: a new instance starts on its own share
        self._read_at: float | None = None
        self._work_seen_at: float | None = None  # the last read that found work (or failed)
        self._reading = threading.Lock()

    def busy(self) -> bool:
        now = self._monotonic()
        if (self._read_at is None or now - self._read_at >= self._period_s) and self._reading.acquire(blocking=False):
            try:
                if self._read():
                    self._work_seen_at = self._monotonic()
                self._read_at = self._monotonic()
                self._busy = self._work_seen_at is not None and self._read_at - self._work_seen_at < self._idle_after_s
            finally:
                self._reading.release()
        return self._busy

    def _read(self) -> bool:
        try:
            attributes = self._sqs.get_queue_attributes(
                QueueUrl=self._url, AttributeNames=list(URGENT_WORK_ATTRIBUTES))["Attributes"]
            return any(int(attributes.get(name, "0")) > 0 for name in URGENT_WORK_ATTRIBUTES)
        except Exception:  # unknown: keep to bulk's own share, never overrun the urgent lane's
            return True


class LendingBuckets:
    """A bulk instance's pace: its own bucket always, and the urgent lane's share lent as a second bucket, taken
    from only while ``urgent_busy()`` is False. A send takes from whichever earns its tokens sooner (its own on a
    tie). Each loan starts with the lent bucket empty, so it comes at its rate, never with a burst on top of
    bulk's own."""

    def __init__(self, own: TokenBucket, lent: TokenBucket, urgent_busy: Callable[[], bool]) -> None:
        self.own, self.lent = own, lent
        self._urgent_busy = urgent_busy
        self._lending = False

    def take(self, tokens: int, max_wait_s: float) -> Slot | None:
        for bucket in sorted(self._usable(), key=lambda bucket: bucket.wait_for(tokens)):
            slot = bucket.take(tokens, max_wait_s)
            if slot is not None:
                return slot
        return None

    def wait_for(self, tokens: int) -> float:
        return min(bucket.wait_for(tokens) for bucket in self._usable())

    def defer(self, tokens: int, ahead: int = 0) -> float:
        """A put-back job's turn, on bulk's own bucket: the loan may end before it comes back."""
        return self.own.defer(tokens, ahead)

    def _usable(self) -> tuple[TokenBucket, ...]:
        if self._urgent_busy():
            self._lending = False
            return (self.own,)
        if not self._lending:  # a loan begins: what the lent bucket earned meanwhile is not bulk's to spend
            self.lent.drain()
            self._lending = True
        return (self.own, self.lent)
