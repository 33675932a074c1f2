"""The urgent lane's share of send_rate, played with a fake clock over many arrival patterns: the urgent lane always
gets its share when it has work, bulk never takes it (beyond the stated worst case after urgent work arrives), and
bulk gets the whole rate while the urgent lane is idle. The real buckets, the real work mark and watch, and the
lane's work item in a real table (the emulator's, over HTTP)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_constructs.lane_rates import paced_instances, split
from sendonce_contract.schema import LaneWorkItem
from sendonce_runtime.lane_share import (
    URGENT_IDLE_AFTER_S,
    WATCH_PERIOD_S,
    LendingBuckets,
    UrgentLaneWatch,
    UrgentWorkMark,
)
from sendonce_runtime.send_rate import TokenBucket

SEND_RATE, BULK_INSTANCES = 10.0, 4
TICK_S, RUN_S = 0.01, 24.0
EPOCH_MS = 1_800_000_000_000  # the fake clock's wall time at its start
_pipelines = itertools.count()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def now_ms(self) -> int:
        return EPOCH_MS + round(self.now * 1000)


class Calls:
    """The DynamoDB requests a client made, by operation, as botocore sends them."""

    def __init__(self, client: Any) -> None:
        self.counts: dict[str, int] = {}
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.counts[model.name] = self.counts.get(model.name, 0) + 1


@dataclass
class Lanes:
    """One pipeline's lanes over a table: its urgent instances' marks and its bulk instances' watches."""

    table: str
    clock: Clock = field(default_factory=Clock)
    pipeline: str = field(default_factory=lambda: f"Test/Lanes{next(_pipelines)}")  # each its own item
    dynamodb: Any = field(default_factory=lambda: boto3.client("dynamodb"))

    def __post_init__(self) -> None:
        self.calls = Calls(self.dynamodb)

    def mark(self, needed_ms: int = 0, unwritten: Any = lambda: None) -> UrgentWorkMark:
        return UrgentWorkMark(self.dynamodb, self.table, self.pipeline, self.clock.now_ms, needed_ms,
                              self.clock.monotonic, unwritten=unwritten)

    def watch(self, table: str | None = None) -> UrgentLaneWatch:
        return UrgentLaneWatch(self.dynamodb, table or self.table, self.pipeline, self.clock.now_ms,
                               monotonic=self.clock.monotonic)

    def lending(self, own_rate: float, lent_rate: float, watch: UrgentLaneWatch | None = None) -> LendingBuckets:
        """A bulk instance's pace, as the handler builds it."""
        return LendingBuckets(TokenBucket(own_rate, monotonic=self.clock.monotonic),
                              TokenBucket(lent_rate, monotonic=self.clock.monotonic), (watch or self.watch()).busy)


@dataclass
class Run:
    urgent_sends: list[float] = field(default_factory=list)
    bulk_sends: list[float] = field(default_factory=list)
    busy: list[tuple[float, float]] = field(default_factory=list)  # intervals with urgent work in hand
    calls: dict[str, int] = field(default_factory=dict)  # the lanes' DynamoDB requests, by operation

    def count(self, sends: list[float], start: float, end: float) -> int:
        return sum(1 for at in sends if start <= at < end)


def play(table: str, share: float, arrivals: list[tuple[float, int]]) -> Run:
    """Bulk flooded throughout; urgent jobs arriving as ``arrivals`` (time, count), each taken at once by an urgent
    instance (its mark written, once a second at most) and sent when its bucket lets it; every instance sends as
    soon as its bucket lets it."""
    rates = split(SEND_RATE, BULK_INSTANCES, share)
    assert rates.urgent_max_concurrency and rates.urgent_instance_rate and rates.bulk_instance_rate
    assert rates.lent_instance_rate
    lanes, run = Lanes(table), Run()
    clock = lanes.clock
    urgent = [(TokenBucket(rates.urgent_instance_rate, monotonic=clock.monotonic), lanes.mark())
              for _ in range(rates.urgent_max_concurrency)]
    bulk = [lanes.lending(rates.bulk_instance_rate, rates.lent_instance_rate)
            for _ in range(rates.bulk_max_concurrency or 0)]
    pending, backlog = sorted(arrivals), 0
    busy_since: float | None = None
    for tick in range(int(RUN_S / TICK_S)):
        clock.now = tick * TICK_S
        while pending and pending[0][0] <= clock.now:
            backlog += pending.pop(0)[1]
        if backlog and busy_since is None:
            busy_since = clock.now
        for bucket, mark in urgent:
            if backlog:
                mark.mark()  # the instance holds records of the backlog: the check before each claim
            while backlog and bucket.take(1, max_wait_s=0):
                backlog -= 1
                run.urgent_sends.append(clock.now)
        if not backlog and busy_since is not None:
            run.busy.append((busy_since, clock.now))
            busy_since = None
        for pace in bulk:
            while pace.take(1, max_wait_s=0):
                run.bulk_sends.append(clock.now)
    if busy_since is not None:
        run.busy.append((busy_since, RUN_S))
    run.calls = lanes.calls.counts
    return run


arrival_patterns = st.lists(st.tuples(st.floats(min_value=0, max_value=RUN_S - 4, allow_nan=False),
                                      st.integers(min_value=1, max_value=30)), max_size=6)


@settings(max_examples=examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(share=st.sampled_from([0.1, 0.2, 0.5]), arrivals=arrival_patterns)
def test_urgent_always_gets_its_share_and_bulk_takes_it_only_while_urgent_is_idle(pipeline, share, arrivals):
    run = play(pipeline.table_name, share, arrivals)
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


def test_with_no_urgent_work_at_all_bulk_sends_the_whole_rate_and_reads_the_item_once_a_second(pipeline):
    run = play(pipeline.table_name, 0.2, [])
    assert run.urgent_sends == []
    assert len(run.bulk_sends) >= SEND_RATE * (RUN_S - 2 * WATCH_PERIOD_S)
    # Each bulk instance reads the item once a period, not once a send (about ten a second here); nothing written.
    assert run.calls.get("GetItem", 0) <= BULK_INSTANCES * (RUN_S / WATCH_PERIOD_S + 1)
    assert "UpdateItem" not in run.calls


def test_an_urgent_lane_at_work_writes_its_item_once_a_second_an_instance_whatever_its_records(pipeline):
    lanes = Lanes(pipeline.table_name)
    mark = lanes.mark()
    for tick in range(500):  # five seconds of records, one every 10 ms
        lanes.clock.now = tick * TICK_S
        mark.mark()
    assert lanes.calls.counts == {"UpdateItem": 5}
    item = boto3.client("dynamodb").get_item(TableName=pipeline.table_name,
                                             Key={LaneWorkItem.KEY: {"S": LaneWorkItem.key(lanes.pipeline)}})["Item"]
    assert item[LaneWorkItem.KIND] == {"S": "urgent"}
    assert int(item[LaneWorkItem.WORKED_AT]["N"]) == EPOCH_MS + 4000  # the last write, a second apart
    assert int(item[LaneWorkItem.EXPIRES_AT]["N"]) > (EPOCH_MS + 4000) // 1000  # the table's TTL removes it


def test_a_bulk_instance_that_cannot_read_the_item_keeps_to_its_own_share(pipeline):
    lanes = Lanes(pipeline.table_name)
    pace = lanes.lending(2.0, 0.5, lanes.watch(table="no-such-table"))  # every read refused
    sent = 0
    for tick in range(1000):
        lanes.clock.now = tick * TICK_S
        while pace.take(1, max_wait_s=0):
            sent += 1
    assert sent <= 2.0 * 10 + 2  # ten seconds at its own rate, plus the bucket it started with
    assert lanes.calls.counts["GetItem"] <= 11  # once a second, not once a send


class _Left:
    """A record's invocation with ``ms`` left, as a check sees it (``delivery.deadline``)."""

    def __init__(self, ms: int) -> None:
        self.deadline = self
        self.ms = ms

    def remaining_ms(self) -> int:
        return self.ms


def test_an_urgent_instance_that_cannot_write_its_item_still_sends_and_tries_again_with_its_next_record():
    lanes, unwritten = Lanes("no-such-table"), []
    mark = lanes.mark(unwritten=lambda: unwritten.append(1))
    sent = [mark(_Left(30_000), lambda delivery: "sent") for _ in range(3)]  # type: ignore[arg-type]
    assert sent == ["sent"] * 3
    assert lanes.calls.counts == {"UpdateItem": 3}  # each failed write tried again at the next record
    assert len(unwritten) == 3  # each counted (the LaneWorkUnwritten metric)


def test_the_work_mark_never_takes_the_time_a_record_s_send_needs(pipeline):
    """A record with no more than its budget and a DynamoDB call left goes on unmarked: the mark is a hint, and a
    write there could leave the send too little time before the deadline."""
    lanes = Lanes(pipeline.table_name)
    mark = lanes.mark(needed_ms=5_000)
    assert mark(_Left(4_999), lambda delivery: "sent") == "sent"  # type: ignore[arg-type]
    assert lanes.calls.counts == {}
    assert mark(_Left(5_000), lambda delivery: "sent") == "sent"  # type: ignore[arg-type]
    assert lanes.calls.counts == {"UpdateItem": 1}


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


def test_a_lent_share_starts_at_its_rate_and_is_not_taken_while_the_urgent_lane_is_busy(pipeline):
    lanes = Lanes(pipeline.table_name)
    lanes.mark().mark()  # the urgent lane took a record just now
    pace = lanes.lending(1.0, 1.0)
    assert pace.take(1, max_wait_s=0).bucket is pace.own
    assert pace.take(1, max_wait_s=0) is None  # the loan is not for a busy urgent lane
    lanes.clock.now += 30  # the urgent lane idle long since; both buckets had time to fill
    first, second = pace.take(1, max_wait_s=0), pace.take(1, max_wait_s=0)
    assert first.bucket is pace.own and second is None  # the loan starts empty: no burst on top of bulk's own
    lanes.clock.now += 1.0
    assert [pace.take(1, max_wait_s=0).bucket for _ in range(2)] == [pace.own, pace.lent]
    assert pace.defer(1) == pytest.approx(1.0)  # put back on bulk's own bucket: the loan may end


def test_the_urgent_lane_counts_as_idle_only_once_it_took_no_record_for_its_idle_time(pipeline):
    """Urgent jobs a few seconds apart: the lane is in use, and bulk keeps to its own share between them; no lane
    holds a batch for it, the item says it."""
    lanes = Lanes(pipeline.table_name)
    watch, mark = lanes.watch(), lanes.mark()
    assert watch.busy() is False  # no item yet: the lane never worked, its share is lent
    mark.mark()
    lanes.clock.now += WATCH_PERIOD_S
    assert watch.busy() is True
    for _ in range(int(URGENT_IDLE_AFTER_S / WATCH_PERIOD_S) - 2):
        lanes.clock.now += WATCH_PERIOD_S
        assert watch.busy() is True  # no record since, but it took one within its idle time
    lanes.clock.now += 2 * WATCH_PERIOD_S
    assert watch.busy() is False
    reads = lanes.calls.counts["GetItem"]
    assert reads == int(URGENT_IDLE_AFTER_S / WATCH_PERIOD_S) + 1  # once a second
    # Within a period, asked again and again (every send of a bulk instance asks), the item is not read again.
    for _ in range(50):
        lanes.clock.now += WATCH_PERIOD_S / 100
        watch.busy()
    assert lanes.calls.counts["GetItem"] == reads
