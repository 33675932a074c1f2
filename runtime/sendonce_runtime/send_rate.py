"""A token bucket in front of the SES call, so a batch's parallel sends stay under the account's sending rate."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class SendRateLimiter:
    """At most ``rate`` sends a second per execution environment, with bursts of up to ``burst``.

    Shared by the batch's threads. ``acquire`` waits for a token but never longer than it is allowed to, so a
    record never waits past the time it needs to send within its invocation.
    """

    def __init__(self, rate: float, burst: float | None = None, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        self._rate = rate
        self._capacity = max(1.0, burst if burst is not None else rate)
        self._tokens = self._capacity
        self._monotonic = monotonic
        self._sleep = sleep
        self._updated = monotonic()
        self._lock = threading.Lock()

    def acquire(self, max_wait_s: float) -> bool:
        """Take a token, waiting up to ``max_wait_s``; False (and no token taken) if none comes in time."""
        with self._lock:
            now = self._monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._updated) * self._rate)
            self._updated = now
            wait = (1.0 - self._tokens) / self._rate if self._tokens < 1.0 else 0.0
            if wait > max_wait_s:
                return False
            # Reserve the token now, so threads queue in order instead of racing for the same refill.
            self._tokens -= 1.0
        if wait > 0:
            self._sleep(wait)
        return True

    def refund(self) -> None:
        """Give back a token that was not used for a send (the key turned out to be a duplicate)."""
        with self._lock:
            self._tokens = min(self._capacity, self._tokens + 1.0)
