"""max_send_rate: a token bucket before each send keeps a batch's parallel sends under the account's rate."""

from __future__ import annotations

import threading
import time

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from fake_time import FakeTime
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_contract.deploy_config import RECEIVE_LEAD_S, planned_wait_s, woken_phase_span_s
from sendonce_contract.message import parse_job
from sendonce_runtime.checks import Delivery
from sendonce_runtime.clock import Deadline
from sendonce_runtime.outcome import Outcome, RecordResult
from sendonce_runtime.send_rate import PaceSends, SendRateLimiter
from sendonce_runtime.sqs_record import SqsRecord


def pace_of(consumer):
    """The consumer's pacing step, whose limiter a test replaces."""
    [pace] = [check for check in consumer.processor.checks if isinstance(check, PaceSends)]
    return pace


def test_a_burst_passes_then_tokens_come_at_the_rate():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=4, burst=2, monotonic=clock.monotonic, sleep=clock.sleep)
    assert [bucket.acquire(max_wait_s=10) for _ in range(4)] == [True] * 4
    assert clock.slept == [0.25, 0.25]  # two from the burst, then one every 1/rate seconds


def test_a_token_that_would_come_too_late_is_not_taken():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=1, burst=1, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=0) is True
    assert bucket.acquire(max_wait_s=0.5) is False  # the next token is a second away
    clock.now += 1.0
    assert bucket.acquire(max_wait_s=0) is True


def test_deferred_jobs_are_given_turns_at_the_rate_after_the_slots_handed_out_and_those_before_them():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=2, burst=1, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=0)  # the burst's token: the next slot is half a second away
    assert [bucket.defer(), bucket.defer(), bucket.defer(tokens=2)] == [0.5, 1.0, 1.5]
    clock.now += 1.5  # the turns of the first two and of one of the third's two recipients have passed
    assert bucket.defer() == 1.0


def test_slots_are_handed_out_in_order_and_a_refund_moves_the_waiting_ones_earlier():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=1, burst=1, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=0)
    assert bucket.next_slot_in() == 1.0
    assert bucket.acquire(max_wait_s=0.5) is False and bucket.next_slot_in() == 1.0  # refused: nothing taken
    bucket.refund()  # the first turned out a duplicate
    assert bucket.next_slot_in() == 0.0 and bucket.acquire(max_wait_s=0)


def test_threads_never_take_more_than_the_rate_allows():
    bucket = SendRateLimiter(rate=50, burst=5)
    taken: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(5):
            assert bucket.acquire(max_wait_s=5)
            with lock:
                taken.append(time.monotonic())

    threads = [threading.Thread(target=take) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken.sort()
    # In any span of t seconds, at most burst + rate * t tokens (plus scheduling slack of one token).
    for i in range(len(taken)):
        for j in range(i, len(taken)):
            assert j - i + 1 <= 5 + 50 * (taken[j] - taken[i]) + 1


def test_parallel_sends_are_spread_to_the_rate_and_all_go_out(pipeline, ses_faults):
    timestamps: list[float] = []
    consumer = pipeline.consumer(parallelism=10, max_send_rate=20.0)
    consumer.processor._sender._client.meta.events.register(
        "before-send.sesv2.SendEmail", lambda **_: timestamps.append(time.monotonic())
    )
    records = [sqs_record(job(f"rate:{n}")) for n in range(10)]
    response = consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))

    assert response == {"batchItemFailures": []}
    assert sum(pipeline.emails_per_key().values()) == 10
    timestamps.sort()
    burst = 20  # the bucket starts full: up to `rate` at once
    for i in range(len(timestamps)):
        for j in range(i, len(timestamps)):
            assert j - i + 1 <= burst + 20 * (timestamps[j] - timestamps[i]) + 1


def test_no_send_slot_left_in_the_invocation_releases_the_claim_for_later(pipeline):
    consumer = pipeline.consumer(parallelism=1, max_send_rate=0.001)  # one send, then the next in 1000 s
    pace_of(consumer).limiter = SendRateLimiter(rate=0.001, phase=lambda: 0.0)  # its first slot at once
    context = FakeContext(FakeClock(), budget_ms=60_000)
    first, second = sqs_record(job("slow:1")), sqs_record(job("slow:2"))
    response = consumer.handle(event(first, second), context)
    assert failed_ids(response) == {second["messageId"]}
    assert pipeline.emails_per_key() == {"slow:1": 1}
    assert pipeline.ledger_item("slow:2") is None


def test_a_worker_killed_while_waiting_for_a_send_slot_leaves_no_claim_behind(pipeline):
    from crash_injection import WorkerKilled

    def killed_while_waiting(_seconds):
        raise WorkerKilled("deploy")

    consumer = pipeline.consumer(parallelism=1, max_send_rate=1.0)
    pace_of(consumer).limiter = SendRateLimiter(rate=1.0, burst=1, sleep=killed_while_waiting)
    first, second = sqs_record(job("wait:1")), sqs_record(job("wait:2"))
    with pytest.raises(WorkerKilled):
        consumer.handle(event(first, second), FakeContext(FakeClock(), budget_ms=60_000))
    assert pipeline.emails_per_key() == {"wait:1": 1}
    assert pipeline.ledger_item("wait:2") is None  # not claimed, so not lost to the crash window
    redelivery = pipeline.consumer(parallelism=1)  # a later delivery of the same job
    assert redelivery.handle(event(second), FakeContext(FakeClock())) == {"batchItemFailures": []}
    assert pipeline.emails_for("wait:2") == 1


def test_a_duplicate_gives_its_send_slot_back():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.001, burst=2, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=0) and bucket.acquire(max_wait_s=0)
    assert bucket.acquire(max_wait_s=0) is False
    bucket.refund()
    assert bucket.acquire(max_wait_s=0) is True


def test_duplicates_do_not_use_up_the_send_rate(pipeline):
    consumer = pipeline.consumer(parallelism=1, max_send_rate=0.001)
    pace_of(consumer).limiter = SendRateLimiter(rate=0.001, burst=2)
    records = [sqs_record(job("dup:1")), sqs_record(job("dup:1")), sqs_record(job("dup:2"))]
    response = consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))
    assert response == {"batchItemFailures": []}
    assert pipeline.emails_per_key() == {"dup:1": 1, "dup:2": 1}


def test_a_send_takes_one_token_per_recipient():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=4, burst=4, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=10, tokens=3) is True  # three recipients: three of the four tokens
    assert bucket.acquire(max_wait_s=10, tokens=3) is True
    assert clock.slept == [0.5]  # one token left, two more at 4 a second


def test_a_job_with_more_recipients_than_the_bucket_holds_waits_for_a_full_bucket_then_goes():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=2, burst=2, monotonic=clock.monotonic, sleep=clock.sleep)
    assert bucket.acquire(max_wait_s=10, tokens=1) is True
    assert bucket.acquire(max_wait_s=10, tokens=5) is True  # waits for a full bucket (0.5 s), then goes
    assert clock.slept == [0.5]
    # The bucket is in debt: the next recipient waits until the rate has paid for all five.
    assert bucket.acquire(max_wait_s=1.0, tokens=1) is False
    assert bucket.acquire(max_wait_s=10, tokens=1) is True
    assert clock.slept[-1] == pytest.approx(2.0)


def test_pacing_counts_every_recipient_of_a_job(pipeline):
    consumer = pipeline.consumer(FakeClock(), parallelism=1, max_send_rate=0.5)
    pace_of(consumer).limiter = SendRateLimiter(rate=0.5, phase=lambda: 0.0)  # its first slot at once
    recipients = {"to": ["a@example.org", "b@example.org"], "cc": ["c@example.org"], "bcc": ["d@example.org"]}
    first, second = sqs_record(job("many:1", **recipients)), sqs_record(job("many:2", **recipients))
    # Four recipients a job, one every two seconds: the first finds a full bucket and goes; the second finds
    # the bucket in debt for eight seconds, more than the invocation has to spare.
    response = consumer.handle(event(first, second), FakeContext(FakeClock(), budget_ms=20_000))
    assert failed_ids(response) == {second["messageId"]}
    assert pipeline.emails_for("many:1") == 1 and pipeline.emails_for("many:2") == 0


def test_below_one_a_second_a_new_bucket_serves_its_first_slot_at_a_random_phase():
    """A bucket of 0.25 a second holds one token, three more seconds of the rate than its second's worth: its
    first slot comes at its phase within those three seconds, and the next ones at the rate after it."""
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.5)
    assert bucket.acquire(max_wait_s=10) is True and clock.slept == [pytest.approx(1.5)]
    assert bucket.next_slot_in() == pytest.approx(4.0)


def test_the_phase_stays_within_what_the_send_may_wait_so_it_never_puts_a_job_back_alone():
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.5)
    assert bucket.acquire(max_wait_s=1.0) is True and clock.slept == [pytest.approx(0.5)]  # half of its 1 s
    # The sends after it keep the cadence of the whole phase (1.5 s of the 3 s span): the next one 4 s after
    # that, so instances woken together, whose first sends all fell within their waits, are spread from then on.
    assert bucket.next_slot_in() == pytest.approx(1.5 + 4.0 - 0.5)


def test_instances_waking_together_spread_their_first_sends_as_one_shared_bucket_would():
    """Twenty instances at 0.25 a second (a pipeline of 5 a second) woken at once: with their phases spread,
    at most the pipeline's second's worth plus its rate goes out in any span, not all twenty at once."""
    draws = iter([n / 20 for n in range(20)])
    clocks = [FakeTime() for _ in range(20)]  # each instance's own, all woken at the same time
    buckets = [SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
               for clock in clocks]
    assert all(bucket.acquire(max_wait_s=10) for bucket in buckets)
    firsts = sorted(sum(clock.slept) for clock in clocks)
    assert firsts[0] == 0.0 and firsts[-1] == pytest.approx(2.85)
    for i in range(20):
        for j in range(i, 20):
            assert j - i + 1 <= 5 + 5 * (firsts[j] - firsts[i]) + 1  # (one token of slack, as draws fall)


def test_instances_whose_first_sends_fell_within_a_short_wait_send_spread_from_their_second():
    """Twenty instances at 0.25 a second of a 3 s function (a second of wait a send): their first sends fall
    within that second, the next ones at their phases over the whole 3 s span, as one bucket of 5/s would."""
    draws = iter([n / 20 for n in range(20)])
    clocks = [FakeTime() for _ in range(20)]
    buckets = [SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
               for clock in clocks]
    assert all(bucket.acquire(max_wait_s=1.0) for bucket in buckets)
    assert max(sum(clock.slept) for clock in clocks) <= 1.0
    seconds = sorted(clock.now - 100.0 + bucket.next_slot_in() for clock, bucket in zip(clocks, buckets, strict=True))
    assert seconds[0] == pytest.approx(4.0) and seconds[-1] == pytest.approx(4.0 + 2.85)
    for i in range(20):
        for j in range(i, 20):
            assert j - i + 1 <= 5 + 5 * (seconds[j] - seconds[i]) + 1


def test_a_bucket_idle_again_draws_a_new_phase_but_not_after_a_refund_in_its_batch():
    draws = iter([0.0, 0.5])
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.5, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
    assert bucket.acquire(max_wait_s=10)  # phase 0: at once
    bucket.refund()  # a duplicate: the bucket is full again, and the batch's next record goes at once
    assert bucket.acquire(max_wait_s=10) and clock.slept == []
    clock.now += 60  # idle: the next send is at a new phase (half of the one second the rounding added)
    assert bucket.acquire(max_wait_s=10) and clock.slept == [pytest.approx(0.5)]


def test_a_busy_bucket_keeps_its_cadence_and_draws_no_new_phase():
    """An instance that keeps sending, each next send asked for a little after its bucket refilled, is not idling:
    its phase never slips (only one draw is there to take)."""
    draws = iter([0.5])
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
    assert bucket.acquire(max_wait_s=10) and clock.slept == [pytest.approx(1.5)]
    for _ in range(5):
        clock.now += bucket.next_slot_in() + 0.5
        assert bucket.acquire(max_wait_s=10) and clock.slept == [pytest.approx(1.5)]  # at once, no new phase


def test_at_one_a_second_or_more_a_bucket_has_no_phase():
    clock = FakeTime()
    for rate in (1.0, 2.5):
        bucket = SendRateLimiter(rate=rate, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.99)
        assert bucket.acquire(max_wait_s=10) and clock.slept == []


# One instance's life, as its bucket sees it: idle gaps, sends (each allowed to wait up to its invocation's spare
# time), some found to be duplicates and refunded; the phase drawn at random. Rates below and above one a second.
instance_lives = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=30.0), st.floats(min_value=0.0, max_value=20.0), st.booleans(),
              st.floats(min_value=0.0, max_value=0.999)),
    min_size=1, max_size=25)


@settings(max_examples=examples(200), deadline=None)
@given(rate=st.sampled_from([0.1, 0.25, 0.5, 0.8, 1.0, 2.5]), life=instance_lives)
def test_a_woken_phase_never_puts_a_job_back_and_never_lets_the_bucket_send_past_its_rate(rate, life):
    clock = FakeTime()
    draws = iter(draw for *_, draw in life)
    bucket = SendRateLimiter(rate=rate, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
    capacity = max(1.0, rate)
    span_s = woken_phase_span_s(rate)
    sends: list[float] = []
    for idle_s, max_wait_s, duplicate, _ in life:
        clock.now += idle_s
        asked_at = clock.now
        idle = bucket.next_slot_in() == 0 and idle_s >= capacity / rate  # full, and not just refilled by a refund
        taken = bucket.acquire(max_wait_s=max_wait_s)
        waited_s = clock.now - asked_at
        assert waited_s <= max_wait_s + 1e-6  # a send never waits past what its invocation leaves
        if idle:
            # A full bucket after idling serves at its phase: never later than the span or the send's wait.
            assert taken and waited_s <= min(span_s, max_wait_s) + 1e-6
        if taken and duplicate:
            bucket.refund()
        elif taken:
            sends.append(clock.now)
    for i, first in enumerate(sends):  # as a token bucket of the rate would pass them, whatever the phases
        for j in range(i, len(sends)):
            assert j - i + 1 <= capacity + rate * (sends[j] - first) + 1e-6


def test_a_new_rate_does_not_end_a_full_bucket_s_idling_so_a_lending_instance_still_draws_its_phase():
    """A bulk instance's rate changes as the urgent lane's share comes and goes, at the first send after idling
    too: its bucket, full since before, is still idle at the new rate and draws its woken phase."""
    clock = FakeTime()
    bucket = SendRateLimiter(rate=0.5, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.5)
    clock.now += 30
    bucket.set_rate(0.4)  # one token, 1.5 s more of the rate than its second's worth
    assert bucket.acquire(max_wait_s=10) and clock.slept == [pytest.approx(0.75)]


def test_instances_of_one_token_woken_together_by_a_flood_settle_their_cadences_spread_over_a_token_s_time():
    """Five instances at 1 a second (a pipeline of 5 a second) woken together by a flood: each sends its first
    at once; once busy, each moves its cadence by its own draw, so their sends spread over each second rather
    than going five at once a second apart (a job handed out between those bunches would wait for the next)."""
    draws = iter([n / 5 for n in range(5)])
    clocks = [FakeTime() for _ in range(5)]
    buckets = [SendRateLimiter(rate=1.0, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: next(draws))
               for clock in clocks]
    assert all(bucket.acquire(max_wait_s=10) for bucket in buckets) and all(c.slept == [] for c in clocks)
    for bucket in buckets:
        bucket.settle_phase()
        bucket.settle_phase()  # once a wake: a busy instance's phase never slips
    assert sorted(bucket.next_slot_in() for bucket in buckets) == pytest.approx([1.0, 1.2, 1.4, 1.6, 1.8])


class _Remaining:
    """A Lambda context on the test's FakeTime."""

    def __init__(self, clock: FakeTime, budget_s: float) -> None:
        self.clock, self.deadline = clock, clock.now + budget_s

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - self.clock.now) * 1000)


def test_an_instance_whose_records_waited_receives_its_next_batch_a_receive_s_lead_before_its_next_slot():
    """A job it holds then waits no more than that lead, rather than while the instance sends the rest; an
    instance whose send went at once holds nothing back (the queue sets the pace)."""
    clock = FakeTime()
    limiter = SendRateLimiter(rate=1.0, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.0)
    pace = PaceSends(limiter, record_budget_ms=13_000, sleep=clock.sleep)
    deadline = Deadline(_Remaining(clock, 30.0))

    def send(key):
        record = sqs_record(job(key))
        delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]), deadline)
        return pace(delivery, lambda d: RecordResult(record["messageId"], Outcome.SENT)).outcome

    assert send("hold:1") is Outcome.SENT and clock.slept == []  # at once: its bucket was full
    assert pace.hold_back(deadline, [RecordResult("m1", Outcome.SENT)]) == 0.0
    assert send("hold:2") is Outcome.SENT and clock.slept == [1.0]  # it waited: the jobs come faster
    assert pace.hold_back(deadline, [RecordResult("m2", Outcome.SENT)]) == pytest.approx(1.0 - RECEIVE_LEAD_S)
    assert limiter.next_slot_in() == pytest.approx(RECEIVE_LEAD_S)


@pytest.mark.parametrize(("timeout_s", "record_budget_ms", "held"), [(5.0, 3250, True), (30.0, 13_000, False)])
def test_a_send_at_once_holds_back_when_the_next_slot_lies_past_what_the_next_batch_may_wait(
        timeout_s, record_budget_ms, held):
    """At 0.25/s a 5 s function's next record may wait 1.6 s for a slot 4 s away: a batch received at once would
    only go back as copies, so the invocation holds until a receive's lead before the slot; a 30 s one's may wait
    15 s, and it holds nothing back (the queue sets the pace)."""
    clock = FakeTime()
    limiter = SendRateLimiter(rate=0.25, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.0)
    pace = PaceSends(limiter, record_budget_ms=record_budget_ms, sleep=clock.sleep)
    deadline = Deadline(_Remaining(clock, timeout_s))
    record = sqs_record(job("hold:lone"))
    delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]), deadline)

    assert pace(delivery, lambda d: RecordResult(record["messageId"], Outcome.SENT)).outcome is Outcome.SENT
    assert clock.slept == []  # the lone email went at once
    # The premise: the next slot (4 s away) is past the next record's wait exactly where the invocation holds.
    assert (limiter.next_slot_in() > planned_wait_s(timeout_s * 1000, record_budget_ms)) is held
    waited = pace.hold_back(deadline, [RecordResult(record["messageId"], Outcome.SENT)])
    if held:
        assert waited == pytest.approx(4.0 - RECEIVE_LEAD_S)
        assert limiter.next_slot_in() == pytest.approx(RECEIVE_LEAD_S)
    else:
        assert waited == 0.0


@pytest.mark.parametrize(("watched", "outcome", "held_s"), [
    (True, Outcome.SENT, 2.0 - RECEIVE_LEAD_S),
    (False, Outcome.SENT, 0.0),
    (True, Outcome.DUPLICATE, 0.0),  # its slot given back: the next slot is now, nothing to hold for
])
def test_an_urgent_lane_s_send_at_once_stays_in_flight_until_its_next_slot_is_a_receive_s_lead_away(
        watched, outcome, held_s):
    """The bulk lane's watch reads the urgent queue's jobs in flight at most once a second: an urgent job deleted
    the moment it was sent is seen by few reads, and bulk lent itself the urgent share between urgent jobs seconds
    apart. So the urgent lane's invocation (``watched``) holds its batch after a send at once, where a bulk one at
    30 s holds nothing back; it holds no longer than its next slot less a receive's lead, which a job received
    meanwhile would have waited for."""
    clock = FakeTime()
    limiter = SendRateLimiter(rate=0.5, monotonic=clock.monotonic, sleep=clock.sleep, phase=lambda: 0.0)
    pace = PaceSends(limiter, record_budget_ms=13_000, sleep=clock.sleep, watched=watched)
    deadline = Deadline(_Remaining(clock, 30.0))
    record = sqs_record(job("urgent:lone"))
    delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]), deadline)

    assert pace(delivery, lambda d: RecordResult(record["messageId"], outcome)).outcome is outcome
    assert clock.slept == []  # the lone email went at once
    assert pace.hold_back(deadline, [RecordResult(record["messageId"], outcome)]) == pytest.approx(held_s)
