"""Pacing: one token bucket per instance before each send keeps a batch's parallel sends under the lane's rate."""

from __future__ import annotations

import random
import threading
import time

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from fake_time import FakeTime
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_contract.deploy_config import RECEIVE_LEAD_S, answer_margin_ms
from sendonce_contract.message import parse_job
from sendonce_runtime.checks import Delivery
from sendonce_runtime.clock import Deadline
from sendonce_runtime.outcome import Outcome, RecordResult, Redeliver
from sendonce_runtime.send_rate import BUSY_SPELL_GAP_SENDS, PaceSends, TokenBucket
from sendonce_runtime.sqs_record import SqsRecord


def pace_of(consumer):
    """The consumer's pacing step (a check, and its one after-batch step), whose bucket a test replaces."""
    [pace] = [check for check in consumer.processor.checks if isinstance(check, PaceSends)]
    assert consumer.after_batch == (pace,)
    return pace


def test_a_full_bucket_passes_a_second_s_worth_then_tokens_come_at_the_rate():
    clock = FakeTime()
    bucket = TokenBucket(rate=4, monotonic=clock.monotonic)
    assert [bucket.take(1, max_wait_s=10).wait_s for _ in range(6)] == [0, 0, 0, 0, 0.25, 0.5]


def test_below_one_a_second_a_bucket_holds_one_token():
    clock = FakeTime()
    bucket = TokenBucket(rate=0.5, monotonic=clock.monotonic)
    assert bucket.capacity == 1.0
    assert bucket.take(1, max_wait_s=0) is not None
    assert bucket.wait_for(1) == pytest.approx(2.0)


def test_tokens_that_would_come_too_late_are_not_taken():
    clock = FakeTime()
    bucket = TokenBucket(rate=1, monotonic=clock.monotonic)
    assert bucket.take(1, max_wait_s=0) is not None
    assert bucket.take(1, max_wait_s=0.5) is None  # the next token is a second away
    assert bucket.wait_for(1) == 1.0  # refused: nothing taken
    clock.now += 1.0
    assert bucket.take(1, max_wait_s=0).wait_s == 0


def test_sends_queue_in_the_order_they_asked_and_a_give_back_serves_the_next_sooner():
    clock = FakeTime()
    bucket = TokenBucket(rate=1, monotonic=clock.monotonic)
    assert [bucket.take(1, max_wait_s=10).wait_s for _ in range(3)] == [0, 1.0, 2.0]
    bucket.give_back(1)  # one of them turned out a duplicate
    assert bucket.wait_for(1) == 2.0


def test_a_give_back_never_fills_the_bucket_past_its_size():
    clock = FakeTime()
    bucket = TokenBucket(rate=2, monotonic=clock.monotonic)
    bucket.give_back(5)
    assert [bucket.take(1, max_wait_s=0) is not None for _ in range(3)] == [True, True, False]


def test_a_send_takes_one_token_per_recipient():
    clock = FakeTime()
    bucket = TokenBucket(rate=4, monotonic=clock.monotonic)
    assert bucket.take(3, max_wait_s=10).wait_s == 0  # three recipients: three of the four tokens
    assert bucket.take(3, max_wait_s=10).wait_s == 0.5  # one token left, two more at 4 a second


def test_a_job_with_more_recipients_than_the_bucket_holds_waits_for_a_full_bucket_then_goes_into_debt():
    clock = FakeTime()
    bucket = TokenBucket(rate=2, monotonic=clock.monotonic)
    assert bucket.take(1, max_wait_s=10).wait_s == 0
    assert bucket.take(5, max_wait_s=10).wait_s == 0.5  # waits for a full bucket, then goes
    # In debt: the next recipient waits until the rate has paid for all five.
    assert bucket.take(1, max_wait_s=1.0) is None
    assert bucket.take(1, max_wait_s=10).wait_s == pytest.approx(2.5)


def test_a_batchs_put_back_jobs_get_turns_at_the_rate_behind_each_other_and_the_next_batch_starts_afresh():
    """Spread within a batch, each at its turn; not across batches: a put-back job goes back to the lane's queue,
    which every instance serves, so turns reserved by earlier batches would hold it back past when it can go."""
    clock = FakeTime()
    bucket = TokenBucket(rate=2, monotonic=clock.monotonic)
    pace = _paced(bucket, clock, record_budget_ms=29_800)  # no time to wait for a token in the invocation
    deadline = Deadline(_Remaining(clock, 30.0))

    def turns(*recipients: int) -> list[float | None]:
        found = []
        for n, count in enumerate(recipients):
            record = sqs_record(job(f"turn:{clock.now}:{n}", to=[f"u{i}@example.org" for i in range(count)]))
            delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]),
                                deadline)
            verdict = pace(delivery, lambda d, r=record: RecordResult(r["messageId"], Outcome.SENT))
            found.append(verdict.retry_after_s if isinstance(verdict, Redeliver) else None)
        pace.after_batch(deadline, [])
        return found

    # The first takes the whole bucket; the next token is half a second away, and each put-back job waits behind
    # those put back before it (whole seconds: SQS's delays).
    assert turns(2, 1, 1, 2) == [None, 1, 1, 2]
    # The next batch (once its invocation held for its next token): its turns start from the bucket again, not
    # behind the last batch's, which its jobs took back to the queue.
    assert turns(2, 2) == [1, 2]


def test_a_drained_bucket_starts_at_its_rate_with_no_burst():
    clock = FakeTime()
    bucket = TokenBucket(rate=1, monotonic=clock.monotonic)
    clock.now += 30
    bucket.drain()
    assert bucket.wait_for(1) == 1.0


operations = st.lists(st.tuples(st.floats(0, 3), st.sampled_from(["take", "give_back", "defer"]),
                                st.integers(1, 4), st.floats(0, 5)), max_size=40)


@settings(max_examples=examples(300), deadline=None)
@given(rate=st.sampled_from([0.5, 1.0, 2.5, 5.0, 14.0]), steps=operations)
def test_sends_never_exceed_the_bucket_size_plus_the_rate_over_any_span(rate, steps):
    """Whatever the order of takes, give-backs and put-backs, and however many recipients: the tokens of the sends
    made (each at its take's time plus its wait; a send given back made none) in any span of t seconds are at most
    the bucket's size plus rate x t, plus what a send for more recipients than the bucket holds overdraws; and no
    send ever waits past what it was allowed."""
    clock = FakeTime(0.0)
    bucket = TokenBucket(rate=rate, monotonic=clock.monotonic)
    sends: list[tuple[float, int]] = []  # (when it goes, tokens)
    for gap_s, operation, tokens, max_wait_s in steps:
        clock.now += gap_s
        if operation == "take":
            slot = bucket.take(tokens, max_wait_s)
            if slot is not None:
                assert slot.wait_s <= max_wait_s + 1e-9 and slot.bucket is bucket
                sends.append((clock.now + slot.wait_s, tokens))
        elif operation == "give_back" and sends:
            # The latest send turned out a duplicate: it made no send, and its tokens come back.
            bucket.give_back(sends.pop()[1])
        else:
            assert bucket.defer(tokens) >= 0
    sends.sort()
    for i in range(len(sends)):
        for j in range(i, len(sends)):
            span_s = sends[j][0] - sends[i][0]
            window = [tokens for _, tokens in sends[i:j + 1]]
            overdraft = max(0.0, max(window) - bucket.capacity)
            assert sum(window) <= bucket.capacity + rate * span_s + overdraft + 1e-6


class BucketTime:
    """The bucket's clock, remembered per thread: when a take's tokens are earned, by the bucket's own account
    (a thread's wake-up after its wait is the scheduler's, which a loaded host delays and bunches)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self) -> float:
        self._local.now = time.monotonic()
        return float(self._local.now)

    def earned(self, slot) -> float:
        return float(self._local.now) + slot.wait_s


def test_threads_never_take_more_than_the_rate_allows():
    clock = BucketTime()
    bucket = TokenBucket(rate=50, monotonic=clock)
    taken: list[float] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(5):
            slot = bucket.take(1, max_wait_s=5)
            assert slot is not None
            with lock:
                taken.append(clock.earned(slot))
            time.sleep(slot.wait_s)

    threads = [threading.Thread(target=take) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken.sort()
    # In any span of t seconds, at most a second's worth plus rate * t tokens.
    for i in range(len(taken)):
        for j in range(i, len(taken)):
            assert j - i + 1 <= 50 + 50 * (taken[j] - taken[i]) + 1e-6


def test_parallel_sends_are_spread_to_the_rate_and_all_go_out(pipeline, ses_faults):
    consumer = pipeline.consumer(parallelism=10, max_send_rate=5.0)
    [pacing] = [check for check in consumer.processor.checks if isinstance(check, PaceSends)]
    clock = BucketTime()
    bucket = pacing.pace = TokenBucket(5.0, monotonic=clock)
    earned: list[float] = []
    take = bucket.take

    def taking(tokens: int, max_wait_s: float, phase: float = 0.0):
        slot = take(tokens, max_wait_s, phase)
        if slot is not None:
            earned.append(clock.earned(slot))
        return slot

    bucket.take = taking  # type: ignore[method-assign]
    records = [sqs_record(job(f"rate:{n}")) for n in range(10)]
    response = consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))

    assert response == {"batchItemFailures": []}
    assert sum(pipeline.emails_per_key().values()) == 10 == len(earned)
    # Each send waits for its tokens before it is claimed and sent: in any span of t seconds of the bucket's
    # clock, at most a second's worth plus the rate times t.
    earned.sort()
    for i in range(len(earned)):
        for j in range(i, len(earned)):
            assert j - i + 1 <= 5 + 5 * (earned[j] - earned[i]) + 1e-6


def test_no_send_slot_left_in_the_invocation_releases_the_claim_for_later(pipeline):
    consumer = pipeline.consumer(parallelism=1, max_send_rate=0.001)  # one send, then the next in 1000 s
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
    pace_of(consumer)._sleep = killed_while_waiting
    first, second = sqs_record(job("wait:1")), sqs_record(job("wait:2"))
    with pytest.raises(WorkerKilled):
        consumer.handle(event(first, second), FakeContext(FakeClock(), budget_ms=60_000))
    assert pipeline.emails_per_key() == {"wait:1": 1}
    assert pipeline.ledger_item("wait:2") is None  # not claimed, so not lost to the crash window
    redelivery = pipeline.consumer(parallelism=1)  # a later delivery of the same job
    assert redelivery.handle(event(second), FakeContext(FakeClock())) == {"batchItemFailures": []}
    assert pipeline.emails_for("wait:2") == 1


def test_duplicates_do_not_use_up_the_send_rate(pipeline):
    consumer = pipeline.consumer(parallelism=1, max_send_rate=2.0)  # two tokens, then one every half second
    waits: list[float] = []
    pace_of(consumer)._sleep = waits.append
    records = [sqs_record(job("dup:1")), sqs_record(job("dup:1")), sqs_record(job("dup:2"))]
    response = consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))
    assert response == {"batchItemFailures": []}
    assert waits == []  # the duplicate gave its token back, so the third send found one
    assert pipeline.emails_per_key() == {"dup:1": 1, "dup:2": 1}


def test_pacing_counts_every_recipient_of_a_job(pipeline):
    consumer = pipeline.consumer(FakeClock(), parallelism=1, max_send_rate=0.5)
    pace = pace_of(consumer)
    pace._sleep = lambda _seconds: None  # the invocation's hold for the next token, not waited here
    # A bucket on a stopped clock: real time passing on a loaded host would earn the second job's tokens.
    pace.pace = TokenBucket(0.5, monotonic=lambda: 0.0)
    recipients = {"to": ["a@example.org", "b@example.org"], "cc": ["c@example.org"], "bcc": ["d@example.org"]}
    first, second = sqs_record(job("many:1", **recipients)), sqs_record(job("many:2", **recipients))
    # Four recipients a job, one token every two seconds: the first finds a full bucket and goes into debt; the
    # second waits for eight seconds of the rate, more than the invocation has to spare.
    response = consumer.handle(event(first, second), FakeContext(FakeClock(), budget_ms=20_000))
    assert failed_ids(response) == {second["messageId"]}
    assert pipeline.emails_for("many:1") == 1 and pipeline.emails_for("many:2") == 0


class _Remaining:
    """A Lambda context on the test's FakeTime."""

    def __init__(self, clock: FakeTime, budget_s: float) -> None:
        self.clock, self.deadline = clock, clock.now + budget_s

    def get_remaining_time_in_millis(self) -> int:
        return int((self.deadline - self.clock.now) * 1000)


def _sender(pace: PaceSends, deadline: Deadline):
    def send(key: str, outcome: Outcome = Outcome.SENT) -> Outcome:
        record = sqs_record(job(key))
        delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]), deadline)
        return pace(delivery, lambda d: RecordResult(record["messageId"], outcome)).outcome
    return send


def _paced(bucket: TokenBucket, clock: FakeTime, phase_shift: float = 0.0, **options) -> PaceSends:
    return PaceSends(bucket, sleep=clock.sleep, monotonic=clock.monotonic,
                     phase_shift=lambda: phase_shift, **{"record_budget_ms": 13_000, **options})


def test_an_instance_that_waited_for_its_tokens_receives_its_next_batch_a_receive_s_lead_before_its_next_one():
    """A job it holds then waits no more than that lead; an instance whose send went at once holds nothing (the
    queue sets the pace)."""
    clock = FakeTime()
    bucket = TokenBucket(rate=1.0, monotonic=clock.monotonic)
    pace = _paced(bucket, clock)
    deadline = Deadline(_Remaining(clock, 30.0))
    send = _sender(pace, deadline)

    assert send("hold:1") is Outcome.SENT and clock.slept == []  # at once: its bucket was full
    assert pace.after_batch(deadline, [RecordResult("m1", Outcome.SENT)]) == 0.0
    assert send("hold:2") is Outcome.SENT and sum(clock.slept) == pytest.approx(1.0)  # it waited: jobs come faster
    assert pace.after_batch(deadline, [RecordResult("m2", Outcome.SENT)]) == pytest.approx(1.0 - RECEIVE_LEAD_S)
    assert bucket.wait_for(1) == pytest.approx(RECEIVE_LEAD_S)


def test_the_first_send_of_a_busy_spell_that_waits_moves_the_instance_s_phase_by_a_random_part_of_its_interval():
    """Instances woken together by a flood would send at one phase for as long as it lasts; the first send of each
    busy spell that waits for its tokens waits a random part of its interval longer, and the instance's later sends
    with it (the bucket spends that part on nothing), once: the spell's next waits keep the new phase, and a spell
    ends after a few sends' intervals with no wait."""
    clock = FakeTime()
    bucket = TokenBucket(rate=1.0, monotonic=clock.monotonic)
    pace = _paced(bucket, clock, phase_shift=0.6)
    deadline = Deadline(_Remaining(clock, 300.0))
    send = _sender(pace, deadline)

    def sent_after(key: str) -> float:
        started = clock.now
        assert send(key) is Outcome.SENT
        return clock.now - started

    assert sent_after("spell:0") == 0.0  # a full bucket: at once, not behind
    assert sent_after("spell:1") == pytest.approx(1.0 + 0.6)  # the spell's first wait: moved by 0.6 of a send
    assert sent_after("spell:2") == pytest.approx(1.0)  # the same spell: the new phase kept
    assert bucket.wait_for(1) == pytest.approx(1.0)
    clock.sleep(BUSY_SPELL_GAP_SENDS * 1.0 + 1.0)  # no send waited for longer than the gap: the spell ends
    assert sent_after("spell:3") == 0.0
    assert sent_after("spell:4") == pytest.approx(1.0 + 0.6)  # a new spell: moved again


def test_a_batch_whose_sends_took_their_tokens_together_keeps_its_spell_into_the_next_batch():
    """A batch's sends take their tokens side by side at its start and wait in turn, its last seconds later: the
    spell is counted from the end of the last wait, so the next batch is the same spell and keeps its phase (counted
    from the takes, each batch of five-recipient jobs began a spell and lost a random part of a second again)."""
    clock = FakeTime()
    pace = PaceSends(TokenBucket(rate=5.0, monotonic=clock.monotonic), record_budget_ms=13_000, sleep=clock.sleep,
                     monotonic=clock.monotonic, phase_shift=lambda: 0.5)
    batch = [pace._take(5, max_wait_s=30) for _ in range(5)]  # as the batch's five threads take at its start
    assert all(batch)
    assert [slot.wait_s for slot in batch if slot] == pytest.approx([0.0, 1.5, 2.5, 3.5, 4.5])  # shifted once
    clock.sleep(4.5 + 0.3)  # its last send, then the next batch's first take
    following = pace._take(5, max_wait_s=30)
    assert following and following.wait_s == pytest.approx(0.7)  # the same spell: not shifted again


def test_a_bucket_scaled_down_to_ses_s_rate_counts_its_spell_in_its_own_sends():
    """Planned at 2.8/s while SES allows 0.8/s: its sends come 1.25 s apart, longer than three of the planned
    intervals. The spell is counted in the bucket's own sends, so a send that waits after a batch's hand-over is the
    same spell and not shifted again (counted in the planned intervals, every batch began a spell and lost a part
    of a send: BENCHMARKS 9g)."""
    clock = FakeTime()
    bucket = TokenBucket(rate=2.8, monotonic=clock.monotonic, ceiling=lambda: 0.8 / 2.8)
    send = _sender(_paced(bucket, clock, phase_shift=0.5), Deadline(_Remaining(clock, 300.0)))

    def waited(key: str) -> float:
        started = clock.now
        assert send(key) is Outcome.SENT
        return clock.now - started

    assert waited("scaled:0") == 0.0  # a full bucket
    assert waited("scaled:1") == pytest.approx(1.25 + 0.5 * 1.25)  # the spell's first wait, shifted
    clock.sleep(1.1)  # the batch handed over, the next one received
    assert waited("scaled:2") == pytest.approx(1.25 - 1.1)  # the same spell: its own token, no shift


def test_a_send_that_gives_its_tokens_back_moves_up_the_sends_queued_behind_it():
    """A batch's sends take their tokens side by side and queue in the bucket; one whose key turns out a duplicate
    gives its tokens back, and the sends behind it go that much sooner, not at the times they were first told."""
    clock = FakeTime()
    bucket = TokenBucket(rate=1.0, monotonic=clock.monotonic)
    first, second, third = (bucket.take(1, max_wait_s=10) for _ in range(3))
    assert first and second and third and [first.wait_s, second.wait_s, third.wait_s] == [0.0, 1.0, 2.0]
    bucket.give_back(1)  # the first's key was a duplicate: nothing sent
    assert bucket.due_in(second) == 0.0 and bucket.due_in(third) == pytest.approx(1.0)
    clock.sleep(0.5)
    assert bucket.due_in(third) == pytest.approx(0.5)


@pytest.mark.parametrize(("rate", "recipients", "batch"), [(1.0, 1, 1), (5.0, 5, 5)],
                         ids=["one-recipient-jobs", "five-recipient-jobs-in-batches-of-five"])
def test_instances_woken_together_by_a_flood_end_up_sending_at_different_moments(rate, recipients, batch):
    """Four instances at one send a second each (one recipient at 1/s, or five at 5/s as SES counts them), their
    first batches handed over at the same moment (a flood after a quiet spell), each on its own timeline and with
    the phase shift's own randomness: within their first batch their sends fall at distinct moments of the second,
    spread across it, where with no shift they would all send together (SES's second meeting them at once), and a
    quiet tenant's job would wait for the next of them up to a whole second."""
    def phases(shift) -> list[float]:
        found = []
        for instance in range(4):
            clock = FakeTime(0.0)
            pace = PaceSends(TokenBucket(rate=rate, monotonic=clock.monotonic), record_budget_ms=13_000,
                             sleep=clock.sleep, monotonic=clock.monotonic,
                             phase_shift=shift(instance))
            deadline = Deadline(_Remaining(clock, 3_600.0))
            sent_at = []
            for n in range(6):  # a flood: the instance stays behind
                record = sqs_record(job(f"flood:{instance}:{n}", to=[f"r{k}@example.org" for k in range(recipients)]))
                delivery = Delivery(SqsRecord.from_event(record), parse_job(record["body"], record["messageId"]),
                                    deadline)
                assert pace(delivery, lambda d: RecordResult("m", Outcome.SENT)).outcome is Outcome.SENT
                sent_at.append(clock.now)
                if (n + 1) % batch == 0:
                    pace.after_batch(deadline, [RecordResult(f"m{n}", Outcome.SENT)])
            found.append(round(sent_at[2] % 1.0, 3))
        return found

    draws = random.Random(7)
    spread = phases(lambda instance: draws.random)
    assert len(set(spread)) == 4 and max(spread) - min(spread) > 0.25, spread
    together = phases(lambda instance: lambda: 0.0)
    assert len(set(together)) == 1, together  # the shift broken: they send in step


@pytest.mark.parametrize(("rate", "budget_s", "held_s"), [
    (0.25, 3.0, 3.0 - answer_margin_ms(3000) / 1000),  # 4 s away: held to the answer margin, a near miss
    (0.01, 5.0, 0.0),  # 100 s away: beyond this invocation and the next, so not held at all
], ids=["held-to-the-answer-margin", "too-far-to-hold"])
def test_a_hold_ends_in_time_for_the_invocation_to_answer_and_is_skipped_for_a_token_out_of_reach(
        rate, budget_s, held_s):
    clock = FakeTime()
    pace = _paced(TokenBucket(rate=rate, monotonic=clock.monotonic), clock, record_budget_ms=1_000)
    deadline = Deadline(_Remaining(clock, budget_s))
    send = _sender(pace, deadline)
    assert send("hold:a") is Outcome.SENT
    assert send("hold:b") is Outcome.PACED  # its token too far: put back, and the instance is behind
    assert pace.after_batch(deadline, [RecordResult("m", Outcome.PACED)]) == pytest.approx(held_s)


@pytest.mark.parametrize(("urgent", "outcome", "held_s"), [
    (True, Outcome.SENT, 2.0 - RECEIVE_LEAD_S),
    (False, Outcome.SENT, 0.0),
    (True, Outcome.DUPLICATE, 0.0),  # its token given back: nothing to hold for
])
def test_an_urgent_lane_s_send_at_once_stays_in_flight_until_its_next_token_is_a_receive_s_lead_away(
        urgent, outcome, held_s):
    """An urgent instance that just spent its token would make the lane's next job wait for the next one (up to
    2 s at 0.5/s), while another urgent instance could send it at once: so the urgent lane's invocation holds its
    batch after a send, and the event source hands the next job to another instance; a bulk one holds nothing when
    its send went at once (its jobs come in floods, and the queue sets its pace). No longer than its next token
    less a receive's lead, which a job received meanwhile would have waited for anyway. Bulk's sharing reads none
    of it: the urgent lane's work item says when it worked (``lane_share``)."""
    clock = FakeTime()
    bucket = TokenBucket(rate=0.5, monotonic=clock.monotonic)
    pace = _paced(bucket, clock, phase_shift=0.9, hold_after_send=urgent)  # not behind: no shift
    deadline = Deadline(_Remaining(clock, 30.0))

    assert _sender(pace, deadline)("urgent:lone", outcome) is outcome
    assert clock.slept == []  # the lone email went at once
    assert pace.after_batch(deadline, [RecordResult("m", outcome)]) == pytest.approx(held_s)


def test_a_bucket_plans_under_ses_s_own_rate_when_ses_allows_less_than_the_pipeline_plans():
    clock = FakeTime()
    factor = [1.0]
    bucket = TokenBucket(rate=4, monotonic=clock.monotonic, ceiling=lambda: factor[0])
    factor[0] = 0.25  # SES's MaxSendRate is a quarter of the pipeline's send_rate
    assert [bucket.take(1, max_wait_s=10).wait_s for _ in range(3)] == [0, 1.0, 2.0]
    assert bucket.rate == 1.0 and bucket.planned_rate == 4


def test_ses_s_max_send_rate_is_read_from_ses_at_most_once_a_minute_and_scales_the_consumer_s_pace(pipeline):
    """The emulator's SES reports the rate it plays (GetAccount's SendQuota.MaxSendRate): a consumer paced at 7 a
    second of a pipeline planned at 14 paces at 1 a second against an SES that sends 2, and asks SES once a minute."""
    from sendonce_local.emulator.ses_limits import SES_RATE

    SES_RATE.limit(2)
    try:
        consumer = pipeline.consumer(max_send_rate=7, planned_send_rate=14, parallelism=1)
        asked = []
        consumer.processor._sender._client.meta.events.register(
            "before-parameter-build.sesv2.GetAccount", lambda **_: asked.append(1))
        bucket = pace_of(consumer).pace
        clock = FakeClock()
        consumer.handle(event(sqs_record(job("receipt:ceiling:u1"))), FakeContext(clock))
        assert bucket.rate == pytest.approx(1.0) and bucket.planned_rate == 7
        consumer.handle(event(sqs_record(job("receipt:ceiling:u2"))), FakeContext(clock))
        assert asked == [1]
        assert pipeline.emails_per_key() == {"receipt:ceiling:u1": 1, "receipt:ceiling:u2": 1}
    finally:
        SES_RATE.limit(None)
