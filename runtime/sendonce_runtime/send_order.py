"""A batch's records take their send slots in the order SQS handed them out.

On a standard queue a batch's records run in parallel, and a thread that reaches the send schedule first would
take the first slot: a record SQS handed out first (a quiet tenant's job, which a fair queue puts ahead of a noisy
one's) could be sent last of its batch, a whole batch's sends later. So each record waits, before it asks for its
slot, until every record before it has asked for its own or was decided without one (invalid, scheduled, put back,
failed), and no longer than ``patience_s``: a record held up by a slow call of its own before pacing (an attachment
read, a copy's delete of its original) does not hold up the records after it past that.
"""

from __future__ import annotations

import threading


class Turn:
    """One record's place in its batch's order: ``wait`` until it is its turn, ``done`` to pass the turn on."""

    def wait(self, patience_s: float) -> None:
        """Until every earlier record has passed its turn on, or ``patience_s`` has gone by."""

    def done(self) -> None:
        """This record has asked for its send slot, or needs none: the next record may ask (idempotent)."""


NO_TURN = Turn()  # a record run alone or in a FIFO group, in order already: nothing to wait for


class BatchOrder:
    """The turns of one batch of ``count`` records, in record order."""

    def __init__(self, count: int) -> None:
        self._passed = [False] * count
        self._first_open = 0  # every record before this one has passed its turn on
        self._condition = threading.Condition()

    def turn(self, index: int) -> Turn:
        return _Place(self, index)

    def wait_turn(self, index: int, patience_s: float) -> None:
        """Until every record before ``index`` has passed its turn on, or ``patience_s`` has gone by."""
        with self._condition:
            self._condition.wait_for(lambda: self._first_open >= index, timeout=max(0.0, patience_s))

    def pass_turn(self, index: int) -> None:
        """Record ``index`` needs its turn no more (idempotent)."""
        with self._condition:
            if self._passed[index]:
                return
            self._passed[index] = True
            while self._first_open < len(self._passed) and self._passed[self._first_open]:
                self._first_open += 1
            self._condition.notify_all()


class _Place(Turn):
    __slots__ = ("_index", "_order")

    def __init__(self, order: BatchOrder, index: int) -> None:
        self._order, self._index = order, index

    def wait(self, patience_s: float) -> None:
        self._order.wait_turn(self._index, patience_s)

    def done(self) -> None:
        self._order.pass_turn(self._index)
