"""Runs one batch's records: concurrently on standard queues, in order within each FIFO message group."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
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


def _run_all(items: list[T], work: Callable[[T], R], parallelism: int) -> list[R]:
    if parallelism <= 1 or len(items) <= 1:
        return [work(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(parallelism, len(items)), thread_name_prefix="sendonce") as pool:
        return list(pool.map(work, items))


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
