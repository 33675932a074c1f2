"""How a batch runs: FIFO groups keep their order, other groups go on; standard batches may run in parallel."""

from __future__ import annotations

import threading

from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record

from sendonce_runtime.batch import run_batch
from sendonce_runtime.outcome import Outcome, RecordResult
from sendonce_runtime.sqs_record import SqsRecord


def test_fifo_failure_blocks_the_rest_of_its_group_only(fifo_pipeline):
    clock = FakeClock()
    consumer = fifo_pipeline.consumer(clock, fifo=True, parallelism=4)
    consumer.processor._ledger.claim("order:2", "other-worker", clock.now_ms() + 60_000, "h")
    a1, a2, a3 = (sqs_record(job(f"order:{n}"), group="alice") for n in (1, 2, 3))
    b1, b2 = (sqs_record(job(f"order:{n}"), group="bob") for n in (4, 5))
    poison = sqs_record("{broken", group="bob")

    response = consumer.handle(event(a1, b1, a2, poison, a3, b2), FakeContext(clock))

    assert failed_ids(response) == {a2["messageId"], a3["messageId"]}
    assert fifo_pipeline.emails_per_key() == {"order:1": 1, "order:4": 1, "order:5": 1}
    [dead] = fifo_pipeline.dead_letters()
    assert dead["Attributes"]["MessageGroupId"] == "bob"


def test_standard_batch_runs_records_concurrently_and_reports_in_order():
    records = [SqsRecord(f"m{i}", "{}", 1, None, "arn") for i in range(10)]
    running, peak = [0], [0]
    lock, gate = threading.Lock(), threading.Barrier(5, timeout=10)

    def process(record):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        if int(record.message_id[1:]) < 5:
            gate.wait()  # the first five meet here only if they run at the same time
        with lock:
            running[0] -= 1
        return RecordResult(record.message_id, Outcome.SENT)

    results = run_batch(records, process, parallelism=5, fifo=False)
    assert [r.message_id for r in results] == [r.message_id for r in records]
    assert peak[0] == 5


def test_parallelism_one_runs_records_in_turn():
    order = []

    def process(record):
        order.append(record.message_id)
        return RecordResult(record.message_id, Outcome.SENT)

    records = [SqsRecord(f"m{i}", "{}", 1, None, "arn") for i in range(4)]
    run_batch(records, process, parallelism=1, fifo=False)
    assert order == ["m0", "m1", "m2", "m3"]
