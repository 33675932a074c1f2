"""A token bucket in front of the SES call, so a batch's parallel sends stay under the account's sending rate."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from .checks import Delivery, Rest
from .outcome import Outcome, Redeliver, Verdict


class SendRateLimiter:
    """At most ``rate`` recipients a second per execution environment, with bursts of up to ``burst``.

    Shared by the batch's threads. ``acquire`` waits for a token but never longer than it is allowed to, so a
    record never waits past the time it needs to send within its invocation.
    """

    def __init__(self, rate: float, burst: float | None = None, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None) -> None:
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        self._rate = rate
        self._burst = burst
        self._capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = self._capacity
        self._monotonic = monotonic
        self._sleep = sleep  # tests pass a fake; by default waiters wait on the condition, so a refund wakes them
        self._updated = monotonic()
        self._condition = threading.Condition()
        # Recipients of jobs sent back for later, paid off at the rate as time passes: when the next one would be
        # served, so paced jobs come back spread at the rate instead of all at once (each wave of them costs every
        # job a receive and a copy).
        self._deferred = 0.0
        self._deferred_at = monotonic()

    def acquire(self, max_wait_s: float, tokens: int = 1) -> bool:
        """Take ``tokens`` (one per recipient), waiting up to ``max_wait_s``; False (and nothing taken) if they do
        not come in time. A send needing more than the bucket holds waits for a full bucket and takes it all
        and more: the bucket goes into debt, so the sends after it wait until the rate has paid for it."""
        deadline = self._monotonic() + max_wait_s
        needed = min(float(tokens), self._capacity)
        with self._condition:
            while True:
                now = self._monotonic()
                self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
                self._updated = now
                if self._tokens >= needed - 1e-9:
                    self._tokens -= tokens
                    return True
                wait = (needed - self._tokens) / self._rate
                if now + wait > deadline + 1e-9:
                    return False
                self._pause(wait)

    def set_rate(self, rate: float) -> None:
        """Pace at ``rate`` from now on (a lane's lent share comes and goes): what was earned at the old rate is
        kept, up to the bucket's size at the new one, and waiters recompute their wait."""
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        with self._condition:
            if rate == self._rate:
                return
            now = self._monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
            self._updated = now
            self._rate = rate
            self._capacity = max(1.0, self._burst if self._burst is not None else rate)
            self._tokens = min(self._tokens, self._capacity)
            self._condition.notify_all()

    def defer(self, tokens: int = 1) -> float:
        """Seconds until a job of ``tokens`` recipients that found no send slot now could be served, after the
        ones deferred before it; it joins them."""
        with self._condition:
            now = self._monotonic()
            self._deferred = max(0.0, self._deferred - (now - self._deferred_at) * self._rate) + tokens
            self._deferred_at = now
            return self._deferred / self._rate

    def refund(self, tokens: int = 1) -> None:
        """Give back tokens that were not used for a send (the key turned out to be a duplicate): a thread
        waiting for them takes them at once, so duplicates cost the pipeline no sending time."""
        with self._condition:
            self._tokens = min(self._capacity, self._tokens + tokens)
            self._condition.notify_all()

    def _pause(self, seconds: float) -> None:
        if self._sleep is None:
            self._condition.wait(timeout=seconds)
            return
        self._condition.release()
        try:
            self._sleep(seconds)
        finally:
            self._condition.acquire()


class PaceSends:
    """The pipeline's send rate: a send slot (one token per recipient, as SES counts) is taken before the claim,
    so nothing waits between claiming a key and sending it (a worker killed while waiting leaves no claim
    behind), and given back when no send was made."""

    def __init__(self, limiter: SendRateLimiter, record_budget_ms: int) -> None:
        self.limiter = limiter
        self._record_budget_ms = record_budget_ms

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        job = delivery.job
        recipients = len(job.to) + len(job.cc) + len(job.bcc)
        spare_s = (delivery.deadline.remaining_ms() - self._record_budget_ms) / 1000
        if not self.limiter.acquire(max_wait_s=max(0.0, spare_s), tokens=recipients):
            return Redeliver(delivery.result(Outcome.PACED, "the send rate leaves no send slot in this invocation"),
                             retry_after_s=math.ceil(self.limiter.defer(recipients)))
        try:
            verdict = rest(delivery)
        except BaseException:
            self.limiter.refund(recipients)
            raise
        if not verdict.outcome.meaning.spends_send_slot:
            self.limiter.refund(recipients)
        return verdict
