"""Monotonic time that a sleep moves on, for the send-rate limiter's tests (the wall clock reads it too where a test
passes a wall offset of zero)."""

from __future__ import annotations


class FakeTime:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
