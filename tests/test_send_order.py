"""A batch's records take their send slots in the order SQS handed them out, whichever of their threads gets to
the send schedule first; a record decided before pacing, or held up by a slow call of its own, holds no turn."""

from __future__ import annotations

import threading
import time

from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from hypothesis import given, settings
from hypothesis import strategies as st

from sendonce_runtime.send_order import BatchOrder
from sendonce_runtime.send_rate import PaceSends, SendRateLimiter

BOUND_S = 10  # a test's threads end long before this, or the test fails


def run_in_threads(work, count, start_order):
    """``work(index)`` for each index in its own thread, the threads let go in ``start_order``."""
    gates = [threading.Event() for _ in range(count)]

    def run(index):
        gates[index].wait(BOUND_S)
        work(index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for index in start_order:
        gates[index].set()
    for thread in threads:
        thread.join(BOUND_S)
        assert not thread.is_alive()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=10).flatmap(
    lambda paced: st.tuples(st.just(paced), st.permutations(range(len(paced))))))
def test_records_take_their_slots_in_record_order_whatever_order_their_threads_come_in(plan):
    """``paced[i]``: record i asks for a slot; else it is decided before pacing (invalid, scheduled, a carried
    send's failure) and only passes its turn on."""
    paced, start_order = plan
    order, taken, lock = BatchOrder(len(paced)), [], threading.Lock()

    def record(index):
        turn = order.turn(index)
        if paced[index]:
            turn.wait(patience_s=BOUND_S)
            with lock:
                taken.append(index)
        turn.done()

    run_in_threads(record, len(paced), start_order)
    assert taken == [i for i, p in enumerate(paced) if p]


def test_a_record_held_up_before_pacing_does_not_hold_the_records_after_it_past_the_patience():
    order = BatchOrder(2)
    started = time.monotonic()
    order.turn(1).wait(patience_s=0.05)  # record 0 never gets to its slot (a slow call of its own)
    assert 0.04 <= time.monotonic() - started < BOUND_S


def test_a_batch_takes_its_slots_in_record_order_when_the_first_record_is_slow_to_ask(pipeline):
    """Through the consumer: records in parallel, the first slow to reach the schedule (as a bulk instance's first
    record reads the urgent lane's queue), an invalid one that never asks; the slots go in record order. Record
    n's job has n recipients, so the schedule tells them apart by the tokens they ask for."""
    asked: list[int] = []

    class SlowFirstAsker(SendRateLimiter):
        def acquire(self, max_wait_s, tokens=1, reserved=None):
            if tokens == 1:
                time.sleep(0.1)  # the others' threads get here first

            def note(busy):
                asked.append(tokens)
                if reserved is not None:
                    reserved(busy)

            return super().acquire(max_wait_s, tokens, note)

    consumer = pipeline.consumer(parallelism=5, max_send_rate=50.0)
    next(c for c in consumer.processor.checks if isinstance(c, PaceSends)).limiter = SlowFirstAsker(rate=50.0)
    records = [sqs_record(job("order:1")), sqs_record("{not json"),
               *(sqs_record(job(f"order:{n}", to=[f"r{i}@example.org" for i in range(n)])) for n in (2, 3, 4))]
    consumer.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))
    assert asked == [1, 2, 3, 4]
    assert pipeline.emails_per_key() == {f"order:{n}": 1 for n in range(1, 5)}
