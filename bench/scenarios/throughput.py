"""2. Throughput and CPU per record, with several instances at once."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

from consumers import factory

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record


def workload(records: int) -> list[dict[str, Any]]:
    """``records`` deliveries: 80% distinct jobs, 20% duplicates of them, in batches of ten."""
    prefix = uuid.uuid4().hex[:8]
    distinct = [job(f"{prefix}:{n}") for n in range(int(records * 0.8))]
    bodies = distinct + distinct[: records - len(distinct)]
    return [record(b) for b in bodies]


def throughput(kind: str, names: dict[str, str], records: int, workers: int, parallelism: int = 1) -> tuple[
    float, float
]:
    """Records per second and CPU milliseconds per record for one run with ``workers`` concurrent instances."""
    handlers = [factory(kind, names, parallelism)()[0] for _ in range(workers)]
    batches: queue.Queue[list[dict[str, Any]]] = queue.Queue()
    items = workload(records)
    for start in range(0, len(items), 10):
        batches.put(items[start : start + 10])

    def work(handler: Any) -> None:
        while True:
            try:
                batch = batches.get_nowait()
            except queue.Empty:
                return
            handler({"Records": batch}, Context())

    threads = [threading.Thread(target=work, args=(h,)) for h in handlers]
    cpu, wall = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return records / wall, cpu * 1000 / records
