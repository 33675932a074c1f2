"""Plays a DynamoDB stream event source mapping: reads the stream's shards in order and invokes the function.

As Lambda does: a batch is retried until the function takes it; with ReportBatchItemFailures, from the first
failed sequence number; a record is never skipped while retries remain. The position moves (and is checkpointed, when
given :class:`StreamCheckpoints`) only once a batch is done with: a batch cut short by ``stop`` is read again
next time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import boto3
from botocore.exceptions import ClientError

from .checkpoints import StreamCheckpoints
from .instances import Ending, FunctionSpec, LambdaInstance

MAX_RETRIES = 10
BUSY_WAIT_S = 0.2  # Lambda polls a shard up to four times a second
IDLE_WAIT_S = 1.0  # after a pass that found nothing: an idle runner must not load the emulator it reads


@dataclass(frozen=True)
class StreamSourceSpec:
    stream_arn: str
    batch_size: int = 100
    insert_only: bool = False  # the mapping's filter: only INSERT events reach the function
    report_batch_item_failures: bool = True


@dataclass
class StreamStats:
    invocations: int = 0
    records_delivered: int = 0
    retries: int = 0
    busy: bool = False
    last_read_empty: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def lambda_stream_record(record: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    dynamodb = dict(record["dynamodb"])
    created = dynamodb.get("ApproximateCreationDateTime")
    if created is not None and hasattr(created, "timestamp"):
        dynamodb["ApproximateCreationDateTime"] = created.timestamp()
    return {"eventID": record["eventID"], "eventName": record["eventName"], "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": region, "dynamodb": dynamodb, "eventSourceARN": stream_arn}


class StreamEventSourceRunner:
    def __init__(self, function: FunctionSpec, source: StreamSourceSpec, base_environment: Mapping[str, str],
                 log: IO[str] | None = None, checkpoints: StreamCheckpoints | None = None) -> None:
        self.function = function
        self.source = source
        self._checkpoints = checkpoints
        self.stats = StreamStats()
        self._instance = LambdaInstance(function, base_environment, log)
        self._streams = boto3.client("dynamodbstreams")
        self._region = self._streams.meta.region_name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stream-poller", daemon=True)

    def start(self) -> StreamEventSourceRunner:
        self._instance.start()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.function.timeout_s + 5)
        self._instance.close()

    def idle(self) -> bool:
        with self.stats._lock:
            return self.stats.last_read_empty and not self.stats.busy

    def _run(self) -> None:
        # A fresh iterator from the last sequence number read, every poll, as a checkpointing reader does. It also
        # survives moto replacing a table's stream shard when it rolls back a failed transaction, which strands
        # any iterator taken before.
        positions: dict[str, str | None] = {}
        while not self._stop.is_set():
            shards = self._streams.describe_stream(StreamArn=self.source.stream_arn)["StreamDescription"]["Shards"]
            moved = False
            for shard in shards:
                shard_id = shard["ShardId"]
                if shard_id not in positions and self._checkpoints is not None:
                    positions[shard_id] = self._checkpoints.get(self.source.stream_arn, shard_id)
                before = positions.get(shard_id)
                positions[shard_id] = self._read(shard_id, before)
                moved = moved or positions[shard_id] != before
            self._stop.wait(BUSY_WAIT_S if moved else IDLE_WAIT_S)

    def _read(self, shard_id: str, after: str | None) -> str | None:
        """Deliver what follows sequence number ``after`` (from the start when None); return the new position."""
        where = {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after} if after else {
            "ShardIteratorType": "TRIM_HORIZON"}
        try:
            iterator = self._streams.get_shard_iterator(StreamArn=self.source.stream_arn, ShardId=shard_id,
                                                        **where)["ShardIterator"]
        except ClientError:
            if after is None:
                raise
            # A checkpoint the shard no longer holds (a replaced shard): from its start, as a new mapping reads.
            return self._read(shard_id, None)
        records = self._streams.get_records(ShardIterator=iterator, Limit=self.source.batch_size).get("Records", [])
        with self.stats._lock:
            self.stats.last_read_empty = not records
        position = self._deliver(records) if records else None
        if position is None:
            return after
        if self._checkpoints is not None:
            self._checkpoints.put(self.source.stream_arn, shard_id, position)
        return position

    def _deliver(self, records: list[dict[str, Any]]) -> str | None:
        """Hand the batch to the function until it takes it or the retries run out (Lambda then moves on, as
        here). Returns the sequence number of the last record done with: when ``stop`` cuts the retries short,
        the one before the first record still to do (None if that is the first), which is read again next."""
        sequences = [r["dynamodb"]["SequenceNumber"] for r in records]
        last = str(sequences[-1])
        batch = [lambda_stream_record(r, self.source.stream_arn, self._region) for r in records]
        if self.source.insert_only:
            batch = [r for r in batch if r["eventName"] == "INSERT"]
        with self.stats._lock:
            self.stats.busy = True
        try:
            for attempt in range(MAX_RETRIES + 1):
                if not batch:
                    return last
                if self._stop.is_set():
                    pending = sequences.index(batch[0]["dynamodb"]["SequenceNumber"])
                    return str(sequences[pending - 1]) if pending else None
                with self.stats._lock:
                    self.stats.invocations += 1
                    self.stats.records_delivered += len(batch)
                    self.stats.retries += attempt > 0
                invocation = self._instance.invoke({"Records": batch})
                if invocation.ending is not Ending.RETURNED:
                    continue  # the whole batch again
                failed = [f.get("itemIdentifier") for f in (invocation.result or {}).get("batchItemFailures", [])]
                if not failed:
                    return last
                in_batch = [r["dynamodb"]["SequenceNumber"] for r in batch]
                first = min(in_batch.index(s) for s in failed if s in in_batch) if set(failed) <= set(in_batch) \
                    else 0
                batch = batch[first:]  # retry from the first failure, keeping order
                time.sleep(0.05 * 2**attempt)
            return last
        finally:
            with self.stats._lock:
                self.stats.busy = False
