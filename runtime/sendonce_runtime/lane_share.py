"""How the two lanes share the send rate. The rule: **a bulk instance may also use the urgent lane's share while the
urgent lane's work item says it took no record in the last 5 s** (``URGENT_IDLE_AFTER_S``).

With ``urgent_lane`` and a ``send_rate`` R, each urgent instance paces at its part of ``urgent_share`` x R, always.
Each bulk instance has two buckets (``send_rate.TokenBucket``): its own, at its part of (1 - ``urgent_share``) x R,
and the loan, its part of the urgent share, taken from only under the rule: then the bulk lane alone sends at R.

The state is one item anyone can read, ``LaneWorkItem`` in the dedupe table (``aws dynamodb get-item`` with its
key): an urgent instance writes when it took a record (``UrgentWorkMark``, a check before the claim, once per
``WATCH_PERIOD_S`` an instance at most), and a bulk instance reads it (``UrgentLaneWatch``, a strongly consistent
``GetItem`` once per ``WATCH_PERIOD_S`` at most). So a bulk instance overruns the urgent share for at most a
watch period plus one token's wait after the urgent lane takes a record after idling. A failed read counts as in
use; a failed write lets a loan last until the next one, and an urgent send SES throttles meanwhile is tried again
(``UrgentThrottleRetry``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sendonce_contract.priority import Priority
from sendonce_contract.schema import LaneWorkItem

from .checks import Delivery, Rest
from .clock import Deadline
from .dynamodb_values import number, string
from .outcome import Verdict
from .send_rate import Slot, TokenBucket
from .ses_sender import Refused, SendOutcome

WATCH_PERIOD_S = 1.0  # how often an urgent instance writes its work, and a bulk instance reads it, at most
# The urgent lane counts as idle, and its share is lent, once it took no record for this long: a lane whose jobs
# come a few seconds apart is in use, not idle. Lent between them, bulk would send at SES's whole rate when each
# next one came, before its watch could see it, and SES would throttle that job or a bulk one; kept to its own
# share meanwhile, SES's second's worth builds up again for the urgent lane's next first send.
URGENT_IDLE_AFTER_S = 5.0
ITEM_LIFETIME_S = 86_400  # a lane's item outlives its last write by a day (the table's TTL), then is gone


# An urgent send SES throttles is tried again in its invocation, this often and for this long at most (then it
# waits as a delayed copy, as any throttled job). The urgent lane's first sends after idling come before bulk reads
# the work item they wrote, and while bulk sends at SES's whole rate SES throttles them; bulk gives the share back
# within its watch's period and a slot, so a try a quarter of a second apart gets the email out within about that,
# where a delayed copy came back 1 to 4 s later.
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


class UrgentWorkMark:
    """The urgent lane's check before the claim: the lane's work item says it took a record now. Written once per
    ``period_s`` an instance at most, by one of the batch's threads while the others go on, and only while the
    record's own budget still fits after the write (``needed_ms``: the hint never takes the time its send needs).
    A failed write is counted (``unwritten``: the ``LaneWorkUnwritten`` metric) and let go: the loan lasts longer,
    and a throttled urgent send is tried again."""

    def __init__(self, dynamodb: Any, table_name: str, pipeline: str | None, now_ms: Callable[[], int],
                 needed_ms: int = 0, monotonic: Callable[[], float] = time.monotonic,
                 period_s: float = WATCH_PERIOD_S, unwritten: Callable[[], None] = lambda: None) -> None:
        self._dynamodb, self._table_name, self._key = dynamodb, table_name, LaneWorkItem.key(pipeline)
        self._now_ms, self._needed_ms, self._monotonic, self._period_s = now_ms, needed_ms, monotonic, period_s
        self._unwritten = unwritten
        self._written_at: float | None = None
        self._writing = threading.Lock()

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        if delivery.deadline.remaining_ms() >= self._needed_ms:
            self.mark()
        return rest(delivery)

    def mark(self) -> None:
        now = self._monotonic()
        if self._written_at is not None and now - self._written_at < self._period_s:
            return
        if not self._writing.acquire(blocking=False):
            return
        try:
            self._written_at = now
            at_ms = self._now_ms()
            self._dynamodb.update_item(
                TableName=self._table_name, Key={LaneWorkItem.KEY: string(self._key)},
                UpdateExpression="SET #kind = :lane, #worked = :at, #expires = :expires",
                ExpressionAttributeNames={"#kind": LaneWorkItem.KIND, "#worked": LaneWorkItem.WORKED_AT,
                                          "#expires": LaneWorkItem.EXPIRES_AT},
                ExpressionAttributeValues={":lane": string(Priority.URGENT.value), ":at": number(at_ms),
                                           ":expires": number(at_ms // 1000 + ITEM_LIFETIME_S)})
        except Exception:  # a sharing hint: the send goes on without it
            self._written_at = None  # tried again with the next record
            self._unwritten()
        finally:
            self._writing.release()


class UrgentLaneWatch:
    """Whether the urgent lane took a record within ``idle_after_s``: its work item, read at most once per
    ``period_s`` per instance; threads that ask while one reads get the last answer."""

    def __init__(self, dynamodb: Any, table_name: str, pipeline: str | None, now_ms: Callable[[], int],
                 period_s: float = WATCH_PERIOD_S, monotonic: Callable[[], float] = time.monotonic,
                 idle_after_s: float = URGENT_IDLE_AFTER_S) -> None:
        self._dynamodb, self._table_name, self._key = dynamodb, table_name, LaneWorkItem.key(pipeline)
        self._now_ms, self._period_s, self._monotonic = now_ms, period_s, monotonic
        self._idle_after_ms = idle_after_s * 1000
        self._busy = True  # until the first read says otherwise: a new instance starts on its own share
        self._read_at: float | None = None
        self._reading = threading.Lock()

    def busy(self) -> bool:
        now = self._monotonic()
        if (self._read_at is None or now - self._read_at >= self._period_s) and self._reading.acquire(blocking=False):
            try:
                worked_at_ms = self._read()
                self._read_at = self._monotonic()
                self._busy = worked_at_ms is None or self._now_ms() - worked_at_ms < self._idle_after_ms
            finally:
                self._reading.release()
        return self._busy

    def _read(self) -> float | None:
        """When the urgent lane last took a record (epoch ms); 0 if it never did; None when unknown."""
        try:
            item = self._dynamodb.get_item(
                TableName=self._table_name, Key={LaneWorkItem.KEY: string(self._key)}, ConsistentRead=True,
                ProjectionExpression="#worked", ExpressionAttributeNames={"#worked": LaneWorkItem.WORKED_AT},
            ).get("Item")
        except Exception:  # unknown: keep to bulk's own share, never overrun the urgent lane's
            return None
        return float(item[LaneWorkItem.WORKED_AT]["N"]) if item else 0.0


class LendingBuckets:
    """A bulk instance's pace: its own bucket always, and the urgent lane's share lent as a second bucket, taken
    from only while ``urgent_busy()`` is False. A send takes from whichever earns its tokens sooner (its own on a
    tie). Each loan starts with the lent bucket empty, so it comes at its rate, never with a burst on top of
    bulk's own."""

    def __init__(self, own: TokenBucket, lent: TokenBucket, urgent_busy: Callable[[], bool]) -> None:
        self.own, self.lent = own, lent
        self._urgent_busy = urgent_busy
        self._lending = False

    def take(self, tokens: int, max_wait_s: float, phase: float = 0.0) -> Slot | None:
        for bucket in sorted(self._usable(), key=lambda bucket: bucket.wait_for(tokens)):
            slot = bucket.take(tokens, max_wait_s, phase)
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
