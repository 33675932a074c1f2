"""Pacing: one token bucket per consumer instance in front of the SES call, so a lane's instances together send
at most its rate (docs: sending rate).

The construct runs a paced lane's event source at no more instances than its rate in emails a second (two at
least, Lambda's minimum), so each instance's share is at least one email a second where the rate allows. Each
instance's bucket holds a second's worth of its share (one token at least) and fills at the share; a send takes
one token per recipient, as SES counts them. A record whose tokens come within what its invocation may still wait
waits for them; one whose tokens come later is put back as a delayed copy due at its turn. After a batch that
waited (the jobs come faster than the instance sends them), the invocation ends a receive's lead before its next
token, so the event source's next batch arrives as it can be sent, not at once to be put back. The first send of a
busy spell that waits for its tokens waits a random part of its own interval longer (a send of five recipients:
five tokens' interval), and the instance's later sends with it: instances woken together by a flood would
otherwise send at one phase for as long as it lasts, SES's second would meet their sends at once and refuse the
ones it has no tokens left for, and a quiet tenant's job would wait up to a whole interval for the next of them.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from sendonce_contract.deploy_config import RECEIVE_LEAD_S, answer_margin_ms

from .checks import Delivery, Rest
from .clock import Deadline, SystemClock
from .outcome import Outcome, RecordResult, Redeliver, Verdict

# A busy spell ends once no send waited for its tokens for this many of its sends' intervals: an instance that keeps
# up now and then within a flood keeps its phase, where each new shift would cost it a part of a send again.
BUSY_SPELL_GAP_SENDS = 3


# A send waiting for its tokens looks again this often: a send queued before it that gave its tokens back (its key
# a duplicate) moves it up.
WAIT_CHECK_S = 0.1


class Slot(NamedTuple):
    """Tokens taken for one send: when they are earned, the bucket they came from (to give them back), and how many
    tokens that bucket must have earned in all for them (its place in the bucket's queue)."""

    wait_s: float
    bucket: TokenBucket
    due: float


class Pace(Protocol):
    """What a send takes its tokens from: one bucket (:class:`TokenBucket`), or bulk's own and the urgent lane's
    lent one (``lane_share.LendingBuckets``)."""

    def take(self, tokens: int, max_wait_s: float, phase: float = 0.0) -> Slot | None: ...

    def wait_for(self, tokens: int) -> float: ...

    def defer(self, tokens: int, ahead: int = 0) -> float: ...


class TokenBucket:
    """``rate`` tokens a second, holding up to a second's worth (one token at least). Shared by a batch's threads.

    A send that finds too few tokens takes them anyway and waits until the rate has earned them: the bucket goes
    into debt, so the sends after it queue behind it in the order they asked, and move up when one before them gives
    its tokens back. A send for more recipients than the bucket holds waits for a full bucket and takes all of it
    and more. ``ceiling``, when given, scales the rate
    down to what SES itself allows (``ses_rate``)."""

    def __init__(self, rate: float, monotonic: Callable[[], float] = time.monotonic,
                 ceiling: Callable[[], float] | None = None) -> None:
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        self.planned_rate = rate
        self.rate = rate
        self.capacity = max(1.0, rate)
        self._ceiling = ceiling
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._tokens = self.capacity
        self._taken = 0.0  # every token taken so far: with the tokens held, all the bucket ever earned
        self._filled_at = monotonic()

    def take(self, tokens: int, max_wait_s: float, phase: float = 0.0) -> Slot | None:
        """Take ``tokens`` if they are earned within ``max_wait_s``; None (and nothing taken) if later. A send that
        waits, given a ``phase`` (0 to 1), waits that part of its own interval longer, within ``max_wait_s``: the
        bucket spends the part on nothing, so its later sends move with it."""
        self._scale()
        with self._lock:
            self._fill()
            wait_s = self._wait_s(tokens)
            if wait_s > max_wait_s + 1e-9:
                return None
            shift = 0.0
            if wait_s > 0 and phase > 0:
                shift_s = max(0.0, min(phase * tokens / self.rate, max_wait_s - wait_s))
                wait_s += shift_s
                shift = shift_s * self.rate
            due = self._taken + shift + min(float(tokens), self.capacity)
            self._tokens -= shift + tokens
            self._taken += shift + tokens
            return Slot(wait_s, self, due)

    def due_in(self, slot: Slot) -> float:
        """Seconds until ``slot``'s tokens are earned, sooner when sends before it gave theirs back."""
        self._scale()
        with self._lock:
            self._fill()
            return max(0.0, (slot.due - (self._tokens + self._taken)) / self.rate)

    def wait_for(self, tokens: int) -> float:
        """Seconds until ``tokens``, asked for now, would be earned."""
        self._scale()
        with self._lock:
            self._fill()
            return self._wait_s(tokens)

    def give_back(self, tokens: int) -> None:
        """Return tokens no send used (the key was a duplicate, or nothing went to SES)."""
        with self._lock:
            self._fill()
            self._tokens = min(self.capacity, self._tokens + tokens)

    def drain(self) -> None:
        """Hold no tokens from now on until the rate earns them (a loan that is not in use builds no burst)."""
        with self._lock:
            self._fill()
            self._tokens = min(self._tokens, 0.0)

    def defer(self, tokens: int, ahead: int = 0) -> float:
        """Seconds until the turn of a job of ``tokens`` recipients that found no tokens in its invocation, behind
        ``ahead`` tokens its batch put back before it."""
        self._scale()
        with self._lock:
            self._fill()
            return self._wait_s(tokens) + ahead / self.rate

    def _scale(self) -> None:
        """The rate SES allows now (read outside the bucket's lock: a read of SES's quota may take a round trip)."""
        if self._ceiling is not None:
            factor = self._ceiling()
            with self._lock:
                self.rate = self.planned_rate * factor
                self.capacity = max(1.0, self.rate)

    def _fill(self) -> float:
        now = self._monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._filled_at) * self.rate)
        self._filled_at = now
        return now

    def _wait_s(self, tokens: int) -> float:
        return max(0.0, (min(float(tokens), self.capacity) - self._tokens) / self.rate)


class PaceSends:
    """The last check before the claim: a send's tokens are taken before its key is claimed, so nothing waits
    between the claim and the send (a worker killed while waiting leaves no claim behind), and given back when no
    send was made. Also an :class:`~.checks.AfterBatch` step: it holds the invocation for the next token once the
    instance is behind."""

    def __init__(self, pace: Pace, record_budget_ms: int,
                 sleep: Callable[[float], None] = time.sleep, hold_after_send: bool = False,
                 monotonic: Callable[[], float] = time.monotonic,
                 phase_shift: Callable[[], float] = random.random,
                 now_ms: Callable[[], int] | None = None) -> None:
        self.pace = pace
        self._now_ms = now_ms or SystemClock().now_ms  # the wall clock a job's expiry is on (the consumer's)
        self._record_budget_ms = record_budget_ms
        self._sleep, self._monotonic, self._phase_shift = sleep, monotonic, phase_shift
        # The urgent lane's: an instance that just spent its token keeps its batch until its next token is near,
        # so the lane's next job, seconds later, goes to one of its instances that can send it at once (two at
        # 0.5/s each: a job sent by the instance that sent the last one would wait up to 2 s for its token).
        self._hold_after_send = hold_after_send
        # A record of the batch under way waited for its tokens or was put back: the jobs come faster than this
        # instance sends them.
        self._behind = False
        # When the busy spell ends unless a send waits again: a few sends' intervals, at the rate of the bucket it
        # waited on (SES's rate may have scaled it down), after the end of the last wait (not its take: a batch
        # takes all its tokens at its start, and its last send may be seconds later).
        self._spell_ends_at: float | None = None
        # The tokens this batch put back so far: its put-back jobs come back spread at the instance's rate, each
        # at its turn, not all at once. Counted per batch only: a put-back job goes back to the lane's queue, which
        # all instances serve, so turns reserved across batches would hold jobs back past when the lane can send
        # them (a burst's last jobs waited out seconds of turns long since free: BENCHMARKS 9g).
        self._put_back_tokens = 0
        self._lock = threading.Lock()

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        job = delivery.job
        tokens = len(job.to) + len(job.cc) + len(job.bcc)
        slot = self._take(tokens, max_wait_s=max(0.0, self._spare_s(delivery)))
        if slot is None:
            self._behind = True
            with self._lock:
                ahead, self._put_back_tokens = self._put_back_tokens, self._put_back_tokens + tokens
            return Redeliver(delivery.result(Outcome.PACED, "the send rate leaves no send slot in this invocation"),
                             retry_after_s=math.ceil(self.pace.defer(tokens, ahead)))
        if slot.wait_s > 0:
            self._behind = True
            self._wait(slot)
        try:
            verdict = rest(delivery)
        except BaseException:
            slot.bucket.give_back(tokens)
            raise
        if not verdict.outcome.meaning.spends_send_slot:
            slot.bucket.give_back(tokens)
        return verdict

    def after_batch(self, deadline: Deadline, results: Sequence[RecordResult]) -> float:
        """Once the instance is behind (or, on the urgent lane, after a send), wait until its next token is a
        receive's lead away, as long as the invocation can still answer in time; the seconds waited."""
        behind, self._behind = self._behind, False
        with self._lock:
            self._put_back_tokens = 0
        sent = any(result.outcome.meaning.spends_send_slot for result in results)
        if not (behind or (self._hold_after_send and sent)):
            return 0.0
        wait_s = self.pace.wait_for(1) - RECEIVE_LEAD_S
        left_s = (deadline.remaining_ms() - answer_margin_ms(deadline.initial_ms)) / 1000
        if wait_s <= 0 or wait_s > left_s + deadline.initial_ms / 1000:
            # Nothing to wait for, or more than this invocation and the next could reach: the jobs wait as
            # delayed copies, each due at its turn.
            return 0.0
        wait_s = min(wait_s, left_s)  # a near miss: held to the deadline, the next batch misses its token by less
        self._sleep(wait_s)
        return wait_s

    def _wait(self, slot: Slot) -> None:
        """Until the slot's tokens are earned, sooner when sends before it gave theirs back; never longer than its
        take said, which its invocation's time allowed (SES's rate may have dropped since)."""
        end = self._monotonic() + slot.wait_s
        while (left_s := min(slot.bucket.due_in(slot), end - self._monotonic())) > 0:
            self._sleep(min(left_s, WAIT_CHECK_S))

    def _take(self, tokens: int, max_wait_s: float) -> Slot | None:
        """The send's tokens; the first send of a busy spell that waits for them waits a random part of its interval
        longer, once (one send of a batch's, though they take side by side)."""
        with self._lock:
            now = self._monotonic()
            starts = self._spell_ends_at is None or now > self._spell_ends_at
            slot = self.pace.take(tokens, max_wait_s, phase=self._phase_shift() if starts else 0.0)
            if slot is not None and slot.wait_s > 0:
                ends_at = now + slot.wait_s + BUSY_SPELL_GAP_SENDS * tokens / slot.bucket.rate
                self._spell_ends_at = max(self._spell_ends_at or ends_at, ends_at)
            return slot

    def _spare_s(self, delivery: Delivery) -> float:
        """How long the record may still wait for its tokens: what is left once its send is budgeted, and never
        past its expiry (handed back instead, it meets ``Expiry`` when it comes back, and is not sent)."""
        spare_s = (delivery.deadline.remaining_ms() - self._record_budget_ms) / 1000
        if delivery.expires_at_ms is None:
            return spare_s
        return min(spare_s, (delivery.expires_at_ms - self._now_ms()) / 1000)
