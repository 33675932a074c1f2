"""A send schedule in front of the SES call, so a batch's parallel sends stay under the account's sending rate,
and an invocation receives no more than its instance can send (docs: sending rate).

Each execution environment paces at its share of the pipeline's rate. Sends are given slots in the order they ask,
as a token bucket would pass them (a burst of up to ``burst`` at once, then one every 1/rate s), and a batch's
records ask in the order SQS handed them out (``send_order``): a record whose slot comes within its invocation
waits for it; one whose slot does not is told at once and put back as a delayed copy due at its turn. An
invocation whose records waited behind earlier sends (the jobs come faster than the instance sends them) ends, when
its deadline allows, a receive's lead (``RECEIVE_LEAD_S``) before this instance's next slot, so the event source
receives the next batch just before it can be sent: not at once (it would come back paced, and again, each time
with a receive and a copy), nor long before (its jobs would wait in the instance while other instances could have
sent them)."""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from sendonce_contract.deploy_config import RECEIVE_LEAD_S, answer_margin_ms, planned_wait_s, woken_phase_span_s

from .checks import Delivery, Rest
from .clock import Deadline
from .outcome import Outcome, RecordResult, Redeliver, Verdict

if TYPE_CHECKING:
    from .pace_seats import PaceSeats
    from .settled_key import SettledKeys

# How long a record waits for the records before it in its batch to ask for their slots: their steps before pacing
# take milliseconds; one still not there after this is held up by a slow call, and the records after it go ahead.
TURN_PATIENCE_S = 0.5
# A record whose send slot is at least this far off (or past what it may wait) reads its key's record first: a
# read takes milliseconds, and a duplicate found so holds its instance no slot's wait, nor goes back as a copy. One
# due sooner waits for its slot unread, and its claim finds a duplicate as before.
SETTLED_READ_AFTER_S = 1.0


def _wall_offset() -> float:
    """Wall-clock time less monotonic time, read at each use: a seat's grid is on the wall clock, which every
    instance shares, and NTP may slew it against the monotonic clock over an environment's hours."""
    return time.time() - time.monotonic()


class SendRateLimiter:
    """At most ``rate`` recipients a second per execution environment, with bursts of up to ``burst``.

    Shared by the batch's threads. Slots are handed out first come, first served: ``acquire`` reserves the
    earliest slot after those already taken and waits for it, or takes nothing when it comes too late, so a
    record never waits past the time it needs to send within its invocation.

    A bucket holds at least one token, more than the second's worth (``burst``) a rate below one a second gives:
    many instances, each at a small share of the pipeline's rate, waking together with full buckets would send
    more at once than the pipeline's rate. So a full bucket that was rounded up to one token (an instance's
    first send, or its first after idling) draws a random phase within the time the rounding added,
    (1 - burst) / rate, and keeps its cadence: its sends after the first come 1 / rate apart from that phase,
    while the first goes as far into what it may wait (the same draw, scaled), so the phase alone never puts a
    job back. Instances waking together spread over the span from their second send on and stay spread while
    they keep sending; phases held within the wait kept them bunched there, drawing SES's throttling every
    1 / rate seconds (docs: sending rate). Once busy (``settle_phase``), a bucket of one token takes the seat
    it is given: its busy sends fall on its seat's grid (``SeatGrid``), so the lane's instances, each on a seat
    of its own, send evenly spread through each second rather than at random phases, whose widest gap a job
    arriving meanwhile waits in. Given no seat (no pace table, or it did not answer), it moves its cadence by a
    random share of the rest of a token's time, so instances woken together by a flood (at one a second, with
    no span at all) do not keep sending in bunches a token's time apart.
    """

    def __init__(self, rate: float, burst: float | None = None, monotonic: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] | None = None, phase: Callable[[], float] | None = None,
                 wall_offset: Callable[[], float] | None = None) -> None:
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        self.rate = rate
        self._burst = burst  # None: one second's worth of the rate
        self._capacity = max(1.0, burst if burst is not None else rate)  # as woken_phase_span_s counts it
        self._monotonic = monotonic
        self._sleep = sleep  # tests pass a fake; by default waiters wait on the condition, so a refund wakes them
        # A draw in [0, 1) for a woken bucket's phase; its own generator, seeded apart in each process.
        self._phase = phase if phase is not None else random.Random().random
        self._condition = threading.Condition()
        # When the bucket is full again after every slot handed out (the "theoretical arrival time" of a token
        # bucket): at time t it holds capacity - (full_at - t) * rate tokens.
        self._full_at = monotonic() - self._capacity / rate
        # Where the slots already handed out and still waited for are now: a waiter keeps its place in line as
        # (slot - offset) / scale, and is due at place * scale + offset. A refund moves them all earlier (offset);
        # a new rate re-spaces them (scale), so each keeps the tokens ahead of it.
        self._scale, self._offset = 1.0, 0.0
        self._waiters = 0
        # Recipients of jobs sent back for later get turns after every slot handed out, at the rate, so paced
        # jobs come back spread at the rate, each when it can be served, instead of all at once.
        self._deferred_until = monotonic()
        self._unsettled = False  # woken from idling, its cadence's phase not yet settled (settle_phase)
        # A seat's grid is spaced a token's time at the bucket's rate, its phase the seat's share of that time:
        # every point is used, so the lane's instances' slots stay evenly spread at whatever rate they pace.
        self._wall_offset = wall_offset or _wall_offset
        self._grid: SeatGrid | None = None
        self._last_point: float | None = None  # the grid point of its last send (monotonic time)

    def acquire(self, max_wait_s: float, tokens: int = 1, reserved: Callable[[bool], None] | None = None) -> bool:
        """Take ``tokens`` (one per recipient), waiting up to ``max_wait_s`` for their slot; False (and nothing
        taken) if it comes later. A send needing more than the bucket holds waits for a full bucket and takes it
        all and more: the bucket goes into debt, so the sends after it wait until the rate has paid for it.
        ``reserved`` is called once the slot is reserved, before waiting for it (the next record's turn), with
        whether the send keeps a busy cadence: it waits behind the slots handed out before it (not a woken
        bucket's phase), or is a seated bucket's send late for its grid point (its batch came after the receive's
        lead; the next one is best received a lead before the next point, not at once)."""
        with self._condition:
            now, woken_slot = self._wake(max_wait_s)
            basis, on_grid = self._basis(now, tokens)
            on_grid = on_grid and woken_slot is None
            # A woken bucket's first send goes within its wait; the sends after it keep the cadence of its phase.
            basis = basis if woken_slot is None else min(basis, woken_slot)
            slot = self._grid_slot(now, basis) if on_grid else basis
            if slot - now > max_wait_s + 1e-9:
                return False
            self._full_at = max(self._full_at, basis) + tokens / self.rate
            if reserved is not None:
                reserved(on_grid or (woken_slot is None and slot - now > 1e-9))
            # The place in line is the bucket's own slot; a seated one waits for the grid point it falls on.
            place = (basis - self._offset) / self._scale
            self._waiters += 1
            try:
                while True:
                    now = self._monotonic()
                    due = place * self._scale + self._offset
                    due = self._grid_slot(now, due) if on_grid else due
                    if due <= now + 1e-9:
                        if on_grid:
                            self._last_point = due
                        return True
                    self._pause(due - now)
            finally:
                self._waiters -= 1
                if not self._waiters:  # nobody keeps a place: start the next line afresh, free of rounding
                    self._scale, self._offset = 1.0, 0.0

    def set_rate(self, rate: float) -> None:
        """Pace at ``rate`` from now on (a lane's lent share comes and goes). What was earned at the old rate is
        kept, up to the bucket's size at the new one; the slots handed out and still waited for are re-spaced at
        the new rate, each keeping the tokens ahead of it, and their waiters recompute their wait. Turns already
        given to deferred jobs stay: each copy is due when it was told."""
        if rate <= 0:
            raise ValueError("the send rate must be positive")
        with self._condition:
            if rate == self.rate:
                return
            now = self._monotonic()
            capacity = max(1.0, self._burst if self._burst is not None else rate)
            # Tokens held now; below zero, what the slots handed out still owe. The debt is paid at the new rate.
            held = min(capacity, self._capacity - max(0.0, self._full_at - now) * self.rate)
            stretch = self.rate / rate
            self._scale *= stretch
            self._offset = now + (self._offset - now) * stretch
            self.rate, self._capacity = rate, capacity
            if self._grid is not None:
                self._grid = self._grid.at_period(1 / rate)
            # A bucket full already stays full since when it was: a new rate does not end its idling, so an
            # instance woken with it draws its phase (else every lending instance woke at the same cadence).
            self._full_at = now + (capacity - held) / rate if held < capacity else min(self._full_at, now)
            self._condition.notify_all()

    def next_slot_in(self, tokens: int = 1) -> float:
        """Seconds until a send of ``tokens`` recipients asked for now would be served."""
        with self._condition:
            now = self._monotonic()
            return self._slot(now, tokens) - now

    @property
    def unsettled(self) -> bool:
        """Woken from idling, and its phase not yet settled: ``settle_phase`` will take a seat if given one."""
        return self._unsettled

    def defer(self, tokens: int = 1) -> float:
        """Seconds until the turn of a job of ``tokens`` recipients that found no send slot now: the first slot
        after every slot handed out and the jobs deferred before it. It joins them."""
        with self._condition:
            now = self._monotonic()
            turn = max(self._deferred_until, self._slot(now, tokens))
            self._deferred_until = turn + tokens / self.rate
            return turn - now

    def refund(self, tokens: int = 1) -> None:
        """Give back tokens that were not used for a send (the key turned out to be a duplicate): the slots
        still waited for move earlier by as much, so duplicates cost the pipeline no sending time."""
        with self._condition:
            now = self._monotonic()
            earlier_s = min(tokens / self.rate, max(0.0, self._full_at - now))
            self._full_at -= earlier_s
            self._offset -= earlier_s
            # No email went at the last grid point: the next send may take it (else it waited a whole period).
            self._last_point = None
            self._condition.notify_all()

    def settle_phase(self, seat_phase: float | None = None) -> None:
        """The instance has become busy after idling (its sends wait behind earlier ones), once a wake. Given a
        seat's phase (a share of the grid's period, ``pace_seats``), its busy sends fall on that seat's grid from
        now on. Given none, a bucket of one token moves its cadence later by a random share of what its woken
        phase left of a token's time (all of it at one a second), so instances woken together by a flood send
        spread over each token's time instead of together. Only once busy: a lone email's next one, a token's
        time later, keeps its slot."""
        with self._condition:
            if not self._unsettled:
                return
            self._unsettled = False
            if seat_phase is not None:
                self._grid = SeatGrid(seat_phase % 1.0, 1 / self.rate)
                return
            rest_s = 1 / self.rate - woken_phase_span_s(self.rate, self._burst)
            self._full_at += self._phase() * max(0.0, rest_s)

    def _wake(self, max_wait_s: float) -> tuple[float, float | None]:
        """Now, and the slot of a bucket found full after idling whose one token is more than its second's worth
        (else None): its cadence moves to a random phase within the time that token takes the rate beyond that
        second, and its first slot to as far into what the send may wait (the same draw, scaled to the wait).
        Idling is being full for a token's time or more: a bucket that just refilled (the instance kept sending,
        or a duplicate gave its slot back) keeps its cadence, so a busy instance's phase never slips."""
        now = self._monotonic()
        if self._capacity > 1 or now - self._full_at < 1 / self.rate:
            return now, None
        self._unsettled = True  # its phase settles over the rest of a token's time once busy (settle_phase)
        span_s = woken_phase_span_s(self.rate, self._burst)
        if span_s <= 0:
            return now, None
        draw = self._phase()
        self._full_at = now - (self._capacity - 1) / self.rate + draw * span_s
        return now, now + draw * min(span_s, max(0.0, max_wait_s))

    def _slot(self, now: float, tokens: int) -> float:
        """When a send of ``tokens`` asked for now is served: the bucket's slot, on a seated one's grid."""
        basis, on_grid = self._basis(now, tokens)
        return self._grid_slot(now, basis) if on_grid else basis

    def _basis(self, now: float, tokens: int) -> tuple[float, bool]:
        """The bucket's slot for ``tokens``: the earliest time it holds them (a full bucket for more than it
        holds), not before now; and whether the send goes on the seat's grid instead. A seated bucket of one
        token does when busy (its slot still to come) or late for its grid point by less than half a period
        (its batch was received after the lead: it sends on arrival and keeps the point's place in its
        cadence). An idle one sends at once, as a lone email should."""
        needed = min(float(tokens), self._capacity)
        earliest = self._full_at - (self._capacity - needed) / self.rate
        if self._grid is None or self._capacity != 1:
            return max(now, earliest), False
        # Just after a seated send whose point lay after the bucket's slot (a rate change), the bucket is full
        # again already: the next send still waits for a point of its own (``_grid_slot``).
        if earliest >= now or self._grid_point(earliest) > now - self._grid.period_s / 2 or self._too_soon(now):
            return earliest, True
        return now, False

    def _too_soon(self, time_s: float) -> bool:
        """Within half a period of the seated bucket's last send."""
        assert self._grid is not None
        return self._last_point is not None and time_s < self._last_point + self._grid.period_s / 2 - 1e-9

    def _grid_slot(self, now: float, basis: float) -> float:
        """The seat's grid point nearest to the bucket's slot ``basis``, not before now. Nearest, not the next:
        the bucket's slot moves off the grid when the rate changes, and the next point would lose up to a whole
        period each time; the points are the seat's alone, so a send up to half a period early takes no other
        instance's slot. When the rate (and so the grid) has just changed, the nearest point may lie within half
        a period of the last send, on the old grid: the send takes the point after it, so the bucket never sends
        two emails closer than that."""
        assert self._grid is not None
        point = self._grid_point(basis)
        while self._too_soon(point):
            point += self._grid.period_s
        return max(now, point)

    def _grid_point(self, time_s: float) -> float:
        assert self._grid is not None
        offset = self._wall_offset()
        return self._grid.nearest(time_s + offset) - offset

    def _pause(self, seconds: float) -> None:
        if self._sleep is None:
            self._condition.wait(timeout=seconds)
            return
        self._condition.release()
        try:
            self._sleep(seconds)
        finally:
            self._condition.acquire()


class SeatGrid(NamedTuple):
    """A seat's send slots: the wall-clock times (``phase`` + k) x ``period_s`` (wall clock, so every instance of
    a lane reads one grid: Lambda's clocks keep to the Amazon Time Sync Service within milliseconds). The phase is
    a share of the period, so the lane's instances, all at one rate, stay evenly spread when it changes."""

    phase: float
    period_s: float

    def nearest(self, wall_time: float) -> float:
        return (self.phase + round(wall_time / self.period_s - self.phase)) * self.period_s

    def at_period(self, period_s: float) -> SeatGrid:
        return SeatGrid(self.phase, period_s)


class PaceSends:
    """The pipeline's send rate: a send slot (one token per recipient, as SES counts) is taken before the claim,
    so nothing waits between claiming a key and sending it (a worker killed while waiting leaves no claim
    behind), and given back when no send was made."""

    def __init__(self, limiter: SendRateLimiter, record_budget_ms: int,
                 sleep: Callable[[float], None] = time.sleep, seats: PaceSeats | None = None,
                 settled: SettledKeys | None = None, watched: bool = False) -> None:
        self.limiter = limiter
        self._settled = settled  # the ledger read before a long wait: a duplicate takes no slot
        # The urgent lane's consumer: the bulk lane's watch (``lane_share``) reads its queue's jobs in flight.
        self._watched = watched
        self._record_budget_ms = record_budget_ms
        self._sleep = sleep
        self._seats = seats  # a lane of more than one instance: the pace table's counter
        # Whether a record of the invocation under way waited behind earlier sends for its slot: the jobs come
        # faster than this instance's rate, so its next batch is best received just before it can be sent.
        self._waited = False

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        job = delivery.job
        recipients = len(job.to) + len(job.cc) + len(job.bcc)
        turn = delivery.turn

        def reserved(busy: bool) -> None:
            if busy:
                self._waited = True
            turn.done()

        try:
            turn.wait(min(TURN_PATIENCE_S, self._spare_s(delivery)))
            settled = self._settled_before_a_long_wait(delivery, recipients)
            if settled is not None:
                return settled
            sending = self.limiter.acquire(max_wait_s=max(0.0, self._spare_s(delivery)), tokens=recipients,
                                           reserved=reserved)
        finally:
            turn.done()
        if not sending:
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

    def _settled_before_a_long_wait(self, delivery: Delivery, recipients: int) -> RecordResult | None:
        """The record's result if its key is settled already, read from the ledger when its slot is far off (a
        second or more, or past what it may wait); else None, and it waits for its slot as it would have."""
        if self._settled is None:
            return None
        spare_s = self._spare_s(delivery)
        wait_s = self.limiter.next_slot_in(recipients)
        if wait_s < min(SETTLED_READ_AFTER_S, spare_s) or spare_s * 1000 < self._settled.call_ms:
            return None
        return self._settled.result(delivery)

    def _spare_s(self, delivery: Delivery) -> float:
        """How long the record may still wait for its slot."""
        return (delivery.deadline.remaining_ms() - self._record_budget_ms) / 1000

    def hold_back(self, deadline: Deadline, results: Sequence[RecordResult]) -> float:
        """After a batch a record of which waited behind earlier sends for its slot or was paced (the jobs come
        faster than this instance sends them): wait until its next slot is a receive's lead away (or nearer, for
        a batch like it whose last record could not wait longer), if that comes before the deadline, so the next
        batch is received just before it can be sent. So does one after which the next slot lies beyond what a
        record of the next invocation may wait (a share below one email per that wait): a batch received at once
        could only go back as delayed copies, where another instance may send it. A batch sent at once holds
        nothing back otherwise: the queue sets the pace, and an instance held back would leave a job arriving
        meanwhile to another, idle one (whose woken phase may delay it). An urgent lane's batch (``watched``)
        holds back after any send too: bulk lends itself the urgent share while its watch (a read of the urgent
        queue a second at most) finds no urgent job waiting or in flight for a few seconds, and a job deleted as
        soon as it was sent is seen by few reads, so bulk's instances lent and gave back the share between urgent
        jobs seconds apart, each change of rate moving their send grids. A job received meanwhile would wait for
        that slot anyway: the hold costs the urgent lane nothing, and its next job goes to an idle instance.
        Returns the seconds waited."""
        waited, self._waited = self._waited, False
        next_wait_s = planned_wait_s(deadline.initial_ms, self._record_budget_ms)
        if not (waited or self._watched or any(r.outcome is Outcome.PACED for r in results)
                or self.limiter.next_slot_in() > next_wait_s):
            return 0.0
        margin_ms = answer_margin_ms(deadline.initial_ms)
        if waited:
            self._settle(deadline, margin_ms)
        # The last record of a batch like this one waits for the first one's slot and the rate's next ones.
        reach_s = min(RECEIVE_LEAD_S, next_wait_s - (len(results) - 1) / self.limiter.rate)
        wait_s = self.limiter.next_slot_in() - max(0.0, reach_s)
        left_s = (deadline.remaining_ms() - margin_ms) / 1000
        if wait_s <= 0 or wait_s > left_s + deadline.initial_ms / 1000:
            # Nothing to wait for, or far more than this invocation has: holding would not make the next batch
            # sendable (its jobs wait as delayed copies, each due at its turn).
            return 0.0
        wait_s = min(wait_s, left_s)  # a near miss: held to the deadline, the next batch misses its slots by less
        self._sleep(wait_s)
        return wait_s

    def _settle(self, deadline: Deadline, margin_ms: float) -> None:
        """Once busy after a wake: take a seat for the bucket's phase, when the pace table's call fits before
        the invocation must answer (else, or with no answer, the bucket settles a random phase)."""
        if not self.limiter.unsettled:
            return
        seat_phase = None
        if self._seats is not None and deadline.remaining_ms() - margin_ms > self._seats.call_ms:
            seat_phase = self._seats.take()
        self.limiter.settle_phase(seat_phase)
