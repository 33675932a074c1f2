"""The urgent lane's share of send_rate, played with a fake clock over many arrival patterns: the urgent lane always
gets its share when it has work, bulk never takes it (beyond the stated worst case after urgent work arrives), and
bulk gets the whole rate while the urgent queue is empty. The real buckets and the real watch, with a fake queue."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_constructs.lane_rates import paced_instances, split
from sendonce_runtime.lane_share import URGENT_IDLE_AFTER_S, WATCH_PERIOD_S, LendingBuckets, UrgentLaneWatch
from sendonce_runtime.send_rate import TokenBucket

SEND_RATE, BULK_INSTANCES = 10.0, 4
TICK_S, RUN_S = 0.01, 24.0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


@dataclass
class UrgentQueue:
    """What GetQueueAttributes would count: urgent jobs enqueued and not yet sent."""

    backlog: int = 0
    calls: int = 0
    failing: bool = False

    def get_queue_attributes(self, QueueUrl: str, AttributeNames: list[str]) -> dict[str, dict[str, str]]:
        self.calls += 1
        if self.failing:
            raise ConnectionError("no answer")
        return {"Attributes": {"ApproximateNumberOfMessages": str(self.backlog),
                               "ApproximateNumberOfMessagesNotVisible": "0",
                               "ApproximateNumberOfMessagesDelayed": "0"}}


@dataclass
class Run:
    urgent_sends: list[float] = field(default_factory=list)
    bulk_sends: list[float] = field(default_factory=list)
    queue_reads: int = 0  # the bulk instances' reads of the urgent queue's counts
    busy: list[tuple[float, float]] = field(default_factory=list)  # intervals with urgent work queued

    def count(self, sends: list[float], start: float, end: float) -> int:
        return sum(1 for at in sends if start <= at < end)


def lending(own_rate: float, lent_rate: float, watch: UrgentLaneWatch, clock: Clock) -> LendingBuckets:
    """A bulk instance's pace, as the handler builds it."""
    return LendingBuckets(TokenBucket(own_rate, monotonic=clock.monotonic),
                          TokenBucket(lent_rate, monotonic=clock.monotonic), watch.busy)


def play(share: float, arrivals: list[tuple[float, int]]) -> Run:
    """Bulk flooded throughout; urgent jobs arriving as ``arrivals`` (time, count); every instance sends as soon as
    its bucket lets it."""
    rates = split(SEND_RATE, BULK_INSTANCES, share)
    assert rates.urgent_max_concurrency and rates.urgent_instance_rate and rates.bulk_instance_rate
    assert rates.lent_instance_rate
    clock, queue, run = Clock(), UrgentQueue(), Run()
    urgent = [TokenBucket(rates.urgent_instance_rate, monotonic=clock.monotonic)
              for _ in range(rates.urgent_max_concurrency)]
    bulk = [lending(rates.bulk_instance_rate, rates.lent_instance_rate,
                    UrgentLaneWatch(queue, "urgent", monotonic=clock.monotonic), clock)
            for _ in range(rates.bulk_max_concurrency or 0)]
    pending = sorted(arrivals)
    busy_since: float | None = None
    for tick in range(int(RUN_S / TICK_S)):
        clock.now = tick * TICK_S
        while pending and pending[0][0] <= clock.now:
            queue.backlog += pending.pop(0)[1]
        if queue.backlog and busy_since is None:
            busy_since = clock.now
        for bucket in urgent:
            while queue.backlog and bucket.take(1, max_wait_s=0):
                queue.backlog -= 1
                run.urgent_sends.append(clock.now)
        if not queue.backlog and busy_since is not None:
            run.busy.append((busy_since, clock.now))
            busy_since = None
        for pace in bulk:
            while pace.take(1, max_wait_s=0):
                run.bulk_sends.append(clock.now)
    if busy_since is not None:
        run.busy.append((busy_since, RUN_S))
    run.queue_reads = queue.calls
    return run


arrival_patterns = st.lists(st.tuples(st.floats(min_value=0, max_value=RUN_S - 4, allow_nan=False),
                                      st.integers(min_value=1, max_value=30)), max_size=6)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(share=st.sampled_from([0.1, 0.2, 0.5]), arrivals=arrival_patterns)
def test_urgent_always_gets_its_share_and_bulk_takes_it_only_while_urgent_is_idle(share, arrivals):
    run = play(share, arrivals)
    urgent_rate, bulk_rate = share * SEND_RATE, (1 - share) * SEND_RATE
    rates = split(SEND_RATE, BULK_INSTANCES, share)
    assert rates.urgent_instance_rate is not None
    # The worst case after urgent work arrives: a watch's read is up to WATCH_PERIOD_S old, plus a bucket's size.
    grace_s = WATCH_PERIOD_S + TICK_S
    for start, end in run.busy:
        # Urgent, while it has work, sends at its share (its buckets start full: at least that).
        whole_s = math.floor((end - start) / TICK_S) * TICK_S
        assert run.count(run.urgent_sends, start, end + TICK_S) >= math.floor(urgent_rate * whole_s) - 1
        # Bulk, past the grace, keeps to its own share (plus what its buckets held: one second of its rate).
        if end - start > grace_s + 1:
            bulk = run.count(run.bulk_sends, start + grace_s, end)
            assert bulk <= bulk_rate * (end - start - grace_s) + bulk_rate + 2 * BULK_INSTANCES, (start, end, bulk)
    # While urgent is idle (and was for its idle time, and a watch period), bulk sends at the whole rate.
    for start, end in idle_windows(run.busy, grace_s + URGENT_IDLE_AFTER_S + WATCH_PERIOD_S):
        if end - start >= 3:
            bulk = run.count(run.bulk_sends, start, end)
            # Less, at most, what each instance's two buckets hold short of a token at the window's two edges.
            assert bulk >= SEND_RATE * (end - start) - 2 * BULK_INSTANCES - 1, (start, end, bulk)


def idle_windows(busy: list[tuple[float, float]], settle_s: float) -> list[tuple[float, float]]:
    """The stretches with no urgent work, each from ``settle_s`` after the last busy one ended."""
    windows, start = [], settle_s
    for busy_start, busy_end in busy:
        if busy_start > start:
            windows.append((start, busy_start))
        start = max(start, busy_end + settle_s)
    if start < RUN_S:
        windows.append((start, RUN_S))
    return windows


def test_with_no_urgent_work_at_all_bulk_sends_the_whole_rate_and_reads_the_queue_once_a_second():
    run = play(0.2, [])
    assert run.urgent_sends == []
    assert len(run.bulk_sends) >= SEND_RATE * (RUN_S - 2 * WATCH_PERIOD_S)
    # Each bulk instance reads the urgent queue once a period, not once a send (about ten a second here).
    assert run.queue_reads <= BULK_INSTANCES * (RUN_S / WATCH_PERIOD_S + 1)


def test_a_bulk_instance_that_cannot_read_the_urgent_queue_keeps_to_its_own_share():
    clock, queue = Clock(), UrgentQueue(failing=True)
    watch = UrgentLaneWatch(queue, "urgent", monotonic=clock.monotonic)
    pace = lending(2.0, 0.5, watch, clock)
    sent = 0
    for tick in range(1000):
        clock.now = tick * TICK_S
        while pace.take(1, max_wait_s=0):
            sent += 1
    assert sent <= 2.0 * 10 + 2  # ten seconds at its own rate, plus the bucket it started with
    assert queue.calls <= 11  # once a second, not once a send


def test_the_split_keeps_the_lanes_sums_to_the_send_rate():
    for share in (0.05, 0.2, 0.5, 0.9):
        for instances in (2, 5, 20, 200):
            rates = split(SEND_RATE, instances, share)
            bulk = rates.bulk_max_concurrency
            assert rates.urgent_max_concurrency is not None and rates.urgent_max_concurrency >= 2
            assert bulk is not None and 2 <= bulk <= instances
            assert rates.urgent_instance_rate and rates.bulk_instance_rate and rates.lent_instance_rate
            assert rates.urgent_instance_rate * rates.urgent_max_concurrency == pytest.approx(share * SEND_RATE)
            assert rates.bulk_instance_rate * bulk == pytest.approx((1 - share) * SEND_RATE)
            assert (rates.bulk_instance_rate + rates.lent_instance_rate) * bulk == pytest.approx(SEND_RATE)
            # Each lane's instances at one email a second or more where its rate gives two of them that.
            for lane_rate, per_instance in ((share * SEND_RATE, rates.urgent_instance_rate),
                                            ((1 - share) * SEND_RATE, rates.bulk_instance_rate)):
                assert per_instance >= 1 - 1e-9 or lane_rate < 2


@settings(max_examples=examples(300), deadline=None)
@given(rate=st.floats(0.1, 500), max_concurrency=st.integers(2, 1000))
def test_a_paced_lane_runs_no_more_instances_than_its_rate_in_emails_a_second(rate, max_concurrency):
    """No more than max_concurrency, two at least; each instance at one email a second or more unless only the
    event source's minimum of two is left; and none left out that would still pace at one a second."""
    instances = paced_instances(rate, max_concurrency)
    assert 2 <= instances <= max_concurrency
    assert rate / instances >= 1 - 1e-9 or instances == 2
    assert instances == max_concurrency or rate / (instances + 1) < 1 + 1e-9


def test_a_lent_share_starts_at_its_rate_and_is_not_taken_while_the_urgent_lane_is_busy():
    clock, queue = Clock(), UrgentQueue(backlog=1)
    pace = lending(1.0, 1.0, UrgentLaneWatch(queue, "urgent", monotonic=clock.monotonic), clock)
    assert pace.take(1, max_wait_s=0).bucket is pace.own
    assert pace.take(1, max_wait_s=0) is None  # the loan is not for a busy urgent lane
    queue.backlog = 0
    clock.now += 30  # the urgent lane idle long since; both buckets had time to fill
    first, second = pace.take(1, max_wait_s=0), pace.take(1, max_wait_s=0)
    assert first.bucket is pace.own and second is None  # the loan starts empty: no burst on top of bulk's own
    clock.now += 1.0
    assert [pace.take(1, max_wait_s=0).bucket for _ in range(2)] == [pace.own, pace.lent]
    assert pace.defer(1) == pytest.approx(1.0)  # put back on bulk's own bucket: the loan may end


def test_the_urgent_lane_counts_as_idle_only_once_no_read_found_work_for_its_idle_time():
    """Urgent jobs a few seconds apart: the lane is in use, and bulk keeps to its own share between them."""
    clock, queue = Clock(), UrgentQueue()
    watch = UrgentLaneWatch(queue, "urgent", monotonic=clock.monotonic)
    assert watch.busy() is False  # nothing seen yet: lent
    queue.backlog = 1
    clock.now += WATCH_PERIOD_S
    assert watch.busy() is True
    queue.backlog = 0
    for _ in range(int(URGENT_IDLE_AFTER_S / WATCH_PERIOD_S) - 1):
        clock.now += WATCH_PERIOD_S
        assert watch.busy() is True  # empty now, but it had work within its idle time
    clock.now += WATCH_PERIOD_S
    assert watch.busy() is False
    assert queue.calls == int(URGENT_IDLE_AFTER_S / WATCH_PERIOD_S) + 2  # still once a second
    # Within a period, asked again and again (every send of a bulk instance asks), the queue is not read again.
    for _ in range(50):
        clock.now += WATCH_PERIOD_S / 100
        watch.busy()
    assert queue.calls == int(URGENT_IDLE_AFTER_S / WATCH_PERIOD_S) + 2
