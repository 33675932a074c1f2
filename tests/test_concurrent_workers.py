"""Eight workers, each its own consumer (as eight Lambda instances), over 500 messages full of duplicates."""

from __future__ import annotations

import queue
import random
import threading
import time

from consumer_harness import FakeContext, event, failed_ids, job, sqs_record

from sendonce_contract.deploy_config import TimeBudget
from sendonce_runtime.clock import SystemClock

WORKERS = 8
DISTINCT_KEYS = 200
MESSAGES = 500
BOUND_S = 180
# Every answer waited for, and leases that outlast any stall: on a host loaded past its cores an SES answer can come
# after the sized read timeout (a send that may have gone, the residual the evidence tests hold), and a starved
# thread can outlive a 30 s invocation that Lambda would have ended. Neither is what this test is about.
INVOCATION_MS = 120_000
PATIENT = TimeBudget.for_function_timeout(INVOCATION_MS / 1000)._replace(ses_read_timeout_s=30.0)


def test_eight_concurrent_workers_send_every_key_exactly_once(pipeline):
    rng = random.Random(7)
    keys = [f"receipt:{n}:u{n % 17}" for n in range(DISTINCT_KEYS)]
    # Every key once, then duplicates: the same job again and re-enqueues, which get new message ids.
    bodies = keys + [rng.choice(keys) for _ in range(MESSAGES - DISTINCT_KEYS)]
    rng.shuffle(bodies)
    work: queue.Queue = queue.Queue()
    for key in bodies:
        work.put(sqs_record(job(key)))
    outstanding = [len(bodies)]
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + BOUND_S

    def worker(parallelism: int) -> None:
        consumer = pipeline.consumer(SystemClock(), parallelism=parallelism, time_budget=PATIENT)
        while time.monotonic() < deadline:
            with lock:
                if outstanding[0] == 0:
                    return
            batch = []
            while len(batch) < 10:
                try:
                    batch.append(work.get_nowait())
                except queue.Empty:
                    break
            if not batch:
                time.sleep(0.005)  # an idle poller's pause; the loop's end is bounded by `deadline`
                continue
            try:
                failed = failed_ids(consumer.handle(event(*batch), FakeContext(SystemClock(), INVOCATION_MS)))
            except BaseException as error:
                errors.append(error)
                return
            with lock:
                outstanding[0] -= len(batch) - len(failed)
            for record in batch:
                if record["messageId"] in failed:  # a batch item failure: SQS would deliver it again
                    work.put(record)

    threads = [threading.Thread(target=worker, args=(1 + i % 4,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    assert outstanding[0] == 0, "workers did not drain the queue within the bound"
    sent = pipeline.emails_per_key()
    assert set(sent) == set(keys)
    assert all(count == 1 for count in sent.values()), {k: c for k, c in sent.items() if c != 1}
