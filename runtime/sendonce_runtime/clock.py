"""Wall-clock time and the invocation's deadline, injectable so tests can move time on."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


class Deadline:
    """Time left in this invocation, read from the Lambda context each time it is asked."""

    def __init__(self, context: LambdaContext) -> None:
        self._context = context
        # About the function timeout: the queue's visibility timeout is at least six times it (a synth rule).
        self.initial_ms = self.remaining_ms()

    def remaining_ms(self) -> int:
        return int(self._context.get_remaining_time_in_millis())
