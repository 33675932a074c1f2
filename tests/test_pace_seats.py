"""Seats: a paced lane's busy instances send on grids of their own, evenly spread through each second, so a job
arriving between two instances' slots (a quiet tenant's, during a flood) waits a share of a second, not the
widest gap between random phases."""

from __future__ import annotations

import itertools
import time

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from fake_time import FakeTime
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from slow_aws import LATE_S

from sendonce_contract.deploy_config import ConsumerConfig, TimeBudget
from sendonce_contract.schema import PaceSeat
from sendonce_local.emulator.slow_services import LATE, Rule
from sendonce_runtime.aws_clients import ledger_config
from sendonce_runtime.lane_share import LendingLimiter
from sendonce_runtime.pace_seats import PaceSeats, seat_phase
from sendonce_runtime.send_rate import PaceSends, SendRateLimiter
from sendonce_testing.pace_table import create_pace_table


def on_grid(time_s: float, phase: float, period_s: float = 1.0, within_s: float = 1e-6) -> bool:
    share = ((time_s / period_s) - phase) % 1.0
    return min(share, 1.0 - share) * period_s < within_s


def widest_gap(phases: list[float]) -> float:
    points = sorted(p % 1.0 for p in phases)
    return max([b - a for a, b in itertools.pairwise(points)] + [1.0 - points[-1] + points[0]])


@settings(max_examples=examples(200), deadline=None)
@given(first=st.integers(min_value=1, max_value=10**12), count=st.integers(min_value=2, max_value=64))
def test_any_run_of_consecutive_seats_spreads_within_twice_an_even_gap(first, count):
    """The instances a flood wakes take consecutive seats, wherever the counter stands and however many."""
    assert widest_gap([seat_phase(first + n) for n in range(count)]) < 2.0 / count


def seated_bucket(clock: FakeTime, rate: float, seat: int) -> SendRateLimiter:
    """A bucket that sent once (at once: its bucket was full) and then became busy, with its seat."""
    bucket = SendRateLimiter(rate=rate, monotonic=clock.monotonic, sleep=clock.sleep, wall_offset=lambda: 0.0)
    assert bucket.acquire(max_wait_s=10) and clock.slept == []
    assert bucket.unsettled
    bucket.settle_phase(seat_phase(seat))
    assert not bucket.unsettled
    return bucket


def test_five_seated_instances_at_one_a_second_send_evenly_spread_through_each_second():
    sends: list[float] = []
    for seat in range(41, 46):
        clock = FakeTime()
        bucket = seated_bucket(clock, 1.0, seat)
        own = []
        for _ in range(6):
            assert bucket.acquire(max_wait_s=10)
            own.append(clock.now)
        assert all(on_grid(t, seat_phase(seat)) for t in own)
        assert [b - a for a, b in itertools.pairwise(own)] == pytest.approx([1.0] * 5)  # its rate
        sends += own
    assert widest_gap(sends) <= 1.2 / 5  # random phases: about 0.45 s at p95


def test_an_idle_seated_bucket_sends_a_lone_email_at_once():
    clock = FakeTime()
    bucket = seated_bucket(clock, 1.0, 7)
    clock.now += 5.0  # idle
    assert bucket.acquire(max_wait_s=10) and clock.slept == []


def test_a_seated_bucket_late_for_its_grid_point_sends_at_once_and_keeps_its_cadence():
    """Its batch was received later than the lead before its slot: it sends on arrival, and its next send is at
    the next point of its grid, not a whole period after the late one."""
    clock = FakeTime()
    bucket = seated_bucket(clock, 1.0, 3)
    assert bucket.acquire(max_wait_s=10)
    point = clock.now
    clock.now = point + 1.0 + 0.15  # 0.15 s past its next point
    slept = len(clock.slept)
    assert bucket.acquire(max_wait_s=10) and len(clock.slept) == slept
    assert bucket.acquire(max_wait_s=10)
    assert clock.now == pytest.approx(point + 2.0)


def test_a_seated_bucket_late_for_its_point_counts_as_busy_so_its_next_batch_is_received_a_lead_before():
    """A send late for its grid point goes at once, but keeps a busy cadence: the invocation then holds back for
    its next point (``hold_back``), else the next batch came at once and its job waited a whole period in the
    instance, where a quiet tenant's job arriving then waited 0.5 to 0.8 s during a flood. A lone email of an
    idle seated bucket is not busy."""
    clock = FakeTime()
    bucket = seated_bucket(clock, 1.0, 3)
    busy: list[bool] = []
    assert bucket.acquire(max_wait_s=10, reserved=busy.append)  # waits for its point
    clock.now += 1.0 + 0.15  # its batch came 0.15 s past the next point
    slept = len(clock.slept)
    assert bucket.acquire(max_wait_s=10, reserved=busy.append) and len(clock.slept) == slept  # at once
    clock.now += 5.0  # idle
    assert bucket.acquire(max_wait_s=10, reserved=busy.append)
    assert busy == [True, True, False]


def test_a_point_a_duplicate_gave_back_is_taken_by_the_next_send_at_once():
    """A duplicate waited for its grid point and sent nothing (``refund``): the next job, received right after,
    goes at once rather than a whole period later (a burst's duplicates at its tail drained it 1.2x its ideal)."""
    clock = FakeTime()
    bucket = seated_bucket(clock, 1.0, 5)
    assert bucket.acquire(max_wait_s=10)  # waits for its point: the duplicate's
    point = clock.now
    bucket.refund()
    clock.now += 0.05  # the next batch's receive
    slept = len(clock.slept)
    assert bucket.acquire(max_wait_s=10) and len(clock.slept) == slept and clock.now == pytest.approx(point + 0.05)
    assert bucket.next_slot_in() == pytest.approx(1.0 - 0.05)  # and its next point is the one after


def test_a_seated_lending_bucket_uses_every_point_of_its_grid_at_either_rate():
    """Its grid is spaced a token's time at its rate, its phase the seat's share of that time: while the urgent
    lane is busy it sends on every point of a 1.25 s grid (0.8 a second), while the loan is on on every point of
    a 1 s one, so no point the lane's instances spread is left unused."""
    clock = FakeTime()
    urgent_busy = [False]
    bucket = LendingLimiter(0.8, 0.2, lambda: urgent_busy[0], monotonic=clock.monotonic, sleep=clock.sleep,
                            phase=lambda: 0.5, wall_offset=lambda: 0.0)
    assert bucket.acquire(max_wait_s=10)
    bucket.settle_phase(seat_phase(12))
    sends: list[tuple[float, float]] = []  # (time, the grid's period then)
    for n in range(30):
        urgent_busy[0] = (n // 5) % 2 == 1
        assert bucket.acquire(max_wait_s=10)
        sends.append((clock.now, 1 / bucket.rate))
    assert all(on_grid(t, seat_phase(12), period_s) for t, period_s in sends)
    gaps = [(b - a, period_s) for (a, _), (b, period_s) in itertools.pairwise(sends)]
    steady = [gap for n, gap in enumerate(gaps) if n % 5 != 4]  # between two sends at one rate
    assert all(gap == pytest.approx(period_s) for gap, period_s in steady)  # every point used
    assert min(gap for gap, _ in gaps) >= 0.5 - 1e-9  # a change of grid never brings two sends closer
    assert 29 / 1.0 < sends[-1][0] - sends[0][0] < 29 / 0.8 + 1.0


@settings(max_examples=examples(100), deadline=None)
@given(steps=st.lists(st.tuples(st.floats(min_value=0.0, max_value=3.0), st.booleans()), min_size=1,
                      max_size=40),
       seat=st.integers(min_value=1, max_value=10**6))
def test_a_seated_bucket_never_sends_faster_than_its_fastest_pace_and_waits_only_for_its_own_points(steps, seat):
    """Whatever the pauses between sends and however the loan comes and goes: a send that waited went at a
    point of its seat's grid at the rate it paced then (but the first after idling, which waits its woken
    phase), no two sends come less than half the fastest period apart, and no window holds more sends than the
    fastest pace gives it, and two."""
    clock = FakeTime()
    urgent_busy = [False]
    bucket = LendingLimiter(0.8, 0.2, lambda: urgent_busy[0], monotonic=clock.monotonic, sleep=clock.sleep,
                            phase=lambda: 0.5, wall_offset=lambda: 0.0)
    assert bucket.acquire(max_wait_s=10)
    sends = [clock.now]
    bucket.settle_phase(seat_phase(seat))
    for pause_s, busy in steps:
        clock.now += pause_s
        urgent_busy[0] = busy
        asked, slept = clock.now, len(clock.slept)
        assert bucket.acquire(max_wait_s=10)
        if len(clock.slept) > slept and not bucket.unsettled:  # it waited, and not a woken bucket's phase
            assert on_grid(clock.now, seat_phase(seat), 1 / bucket.rate) and clock.now > asked
        sends.append(clock.now)
    assert all(b - a >= 0.5 - 1e-9 for a, b in itertools.pairwise(sends))
    for i, start in enumerate(sends):
        for j in range(i, len(sends)):
            assert j - i + 1 <= (sends[j] - start) * 1.0 + 2


def test_an_unseated_bucket_settles_a_random_phase_as_before():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=1.0, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.25)
    assert bucket.acquire(max_wait_s=10)
    bucket.settle_phase(None)
    assert bucket.next_slot_in() == pytest.approx(1.25)


# Against the emulator, over HTTP.

def three_second_settings() -> ConsumerConfig:
    return ConsumerConfig(table_name="dedupe", dead_letter_queue_url="unused",
                          time_budget=TimeBudget.for_function_timeout(3))


def test_each_take_is_the_next_seat_of_its_own_lane(aws):
    table = create_pace_table(boto3.client("dynamodb"), "pace")
    config = three_second_settings()
    client = boto3.client("dynamodb", config=ledger_config(config))
    bulk, urgent = (PaceSeats(client, table, lane, config.budget.ledger_call_ms) for lane in ("bulk", "urgent"))
    assert [bulk.take() for _ in range(3)] == [seat_phase(1), seat_phase(2), seat_phase(3)]
    assert urgent.take() == seat_phase(1)


def test_a_pace_table_that_answers_late_or_not_at_all_leaves_the_phase_random(aws, slow):
    table = create_pace_table(boto3.client("dynamodb"), "pace")
    config = three_second_settings()
    client = boto3.client("dynamodb", config=ledger_config(config), endpoint_url=slow.endpoint)
    seats = PaceSeats(client, table, "bulk", config.budget.ledger_call_ms)
    slow.fault(Rule("dynamodb", "UpdateItem", LATE))
    assert config.budget.ledger_call_timeouts_s[1] < LATE_S  # the client gives up before the answer
    assert seats.take() is None
    slow.fault(Rule("dynamodb", "UpdateItem", "ProvisionedThroughputExceededException"))
    assert seats.take() is None
    assert PaceSeats(client, "no-such-table", "bulk", config.budget.ledger_call_ms).take() is None
    slow.clear()
    assert seats.take() is not None


@pytest.mark.parametrize("lane", [None, "bulk"], ids=["without-lanes", "bulk-lane"])
def test_a_consumer_that_becomes_busy_takes_its_lane_s_next_seat(pipeline, lane):
    """Two jobs in a batch at one a second: the second waits behind the first, so the instance is busy; after
    the batch it takes a seat, and its next send slot is a point of that seat's grid. Without lanes the one
    queue is the bulk lane's (a key may not be empty)."""
    table = create_pace_table(boto3.client("dynamodb"), "pace")
    consumer = pipeline.consumer(parallelism=1, max_send_rate=1.0, pace_table=table, lane=lane)
    [pace] = [check for check in consumer.processor.checks if isinstance(check, PaceSends)]
    records = [sqs_record(job("seat:1")), sqs_record(job("seat:2"))]
    assert consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=30_000)) == {"batchItemFailures": []}
    assert pipeline.emails_per_key() == {"seat:1": 1, "seat:2": 1}  # from the emulator's SES
    item = boto3.client("dynamodb").get_item(TableName=table, Key={PaceSeat.LANE: {"S": "bulk"}})["Item"]
    assert item[PaceSeat.TAKEN] == {"N": "1"}
    assert not pace.limiter.unsettled
    slot = time.time() + pace.limiter.next_slot_in()
    assert on_grid(slot, seat_phase(1), within_s=0.005)  # two clocks read a moment apart
