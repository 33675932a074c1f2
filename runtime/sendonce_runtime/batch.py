"""Runs one batch's records: concurrently on standard queues, and in order within each FIFO message group."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

from .outcome import Outcome, RecordResult
from .sqs_record import SqsRecord

T = TypeVar("T")
R = TypeVar("R")
ProcessRecord = Callable[[SqsRecord], RecordResult]


def run_batch(
    records: Sequence[SqsRecord], process: ProcessRecord, parallelism: int, fifo: bool
) -> list[RecordResult]:
    """Results in the order of ``records``. A failure in a FIFO group fails the rest of that group only."""
    if fifo:
        groups = _by_group(records)
        runs = _run_all(list(groups.values()), _group_runner(process), parallelism)
        by_id = {result.message_id: result for run in runs for result in run}
        return [by_id[record.message_id] for record in records]
    return _run_all(list(records), process, parallelism)


_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(parallelism: int) -> ThreadPoolExecutor:
    """One pool per execution environment, kept across invocations: starting ten threads for every batch costs
    more than a DynamoDB round trip."""
    with _pools_lock:
        if parallelism not in _pools:
            _pools[parallelism] = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="sendonce")
        return _pools[parallelism]


def _run_all(items: list[T], work: Callable[[T], R], parallelism: int) -> list[R]:
    if parallelism <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    futures = [_pool(parallelism).submit(work, item) for item in items]
    wait(futures)  # every record settles before the batch answers, even when one of them raised
    return [future.result() for future in futures]


def _by_group(records: Sequence[SqsRecord]) -> dict[str, list[SqsRecord]]:
    groups: dict[str, list[SqsRecord]] = {}
    for record in records:
        groups.setdefault(record.message_group_id or "", []).append(record)
    return groups


def _group_runner(process: ProcessRecord) -> Callable[[list[SqsRecord]], list[RecordResult]]:
    def run_group(group: list[SqsRecord]) -> list[RecordResult]:
        results: list[RecordResult] = []
        for record in group:
            if results and results[-1].redeliver:
                # Order within a group holds only if nothing after a failure is acknowledged.
                results.append(RecordResult(record.message_id, Outcome.GROUP_BLOCKED,
                                            reason="an earlier message of its group failed"))
            else:
                results.append(process(record))
        return results

    return run_group
