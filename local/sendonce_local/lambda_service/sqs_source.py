"""Plays Lambda's SQS event source mapping against a queue in the emulator, as the AWS docs describe it.

Pollers long-poll the queue and hand each batch to a Lambda instance (a worker process). What the function
returns decides what is deleted: with ReportBatchItemFailures, everything but the listed failures; a function
error, a crash or a timeout deletes nothing, so the batch comes back after the visibility timeout. The queue's
own redrive policy moves a message to its DLQ once it has been received maxReceiveCount times.

Tenants: on AWS, a fair queue's order is SQS's, not the event source mapping's (Lambda receives what SQS hands
out). So the emulator's SQS plays it (``emulator.sqs_fair_queues``: quiet tenants' messages first while a tenant is
noisy), and these pollers receive as Lambda does, with no receive-more-and-put-back of their own that would spend
SQS requests Lambda never makes. A record keeps its ``MessageGroupId`` in ``attributes``, as Lambda's does.

Where it plays AWS loosely: it starts one poller per instance, max_concurrency of them at once, each waiting for
its instance's invocation before receiving again; AWS starts five pollers and scales them with the backlog, and
with a maximum concurrency it does not invoke past it (messages it cannot invoke wait in the queue). Its pollers
wait 1 s a receive where AWS's long-poll 20 s, so a runner stops within a second: their empty receives are counted
apart (``RunnerStats.empty_receives``). A batch is what one receive returns (at most 10); no batching window.
A mapping in provisioned mode (``ProvisionedPollerConfig``) is played as standard mode: these pollers are always
up anyway, and how fast AWS adds more is not played.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import IO, Any

import boto3

from .instances import Ending, FunctionSpec, Invocation, LambdaInstance

MAX_RECEIVE = 10
POLL_WAIT_S = 1


@dataclass(frozen=True)
class EventSourceSpec:
    queue_url: str
    queue_arn: str
    batch_size: int = 10
    max_concurrency: int = 2
    report_batch_item_failures: bool = True


@dataclass
class RunnerStats:
    receives: int = 0  # ReceiveMessage calls the pollers made
    empty_receives: int = 0  # of which returned nothing (the pollers' idle cost)
    invocations: int = 0
    records_delivered: int = 0
    records_deleted: int = 0
    records_failed: int = 0
    function_errors: int = 0
    workers_killed: int = 0
    timeouts: int = 0
    faults_armed: int = 0
    in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class FaultPlan:
    """Arms a fault for a share of invocations, at the N-th call it watches (see the worker's ``FAULT_KINDS``):
    by default a kill before or after SES accepted a send."""

    def __init__(self, probability: float, seed: int, kinds: tuple[str, ...] = ("before_send", "after_send"),
                 forced: int = 0) -> None:
        self._probability = probability
        # The first faults always fire, at an invocation's first watched call: every invocation is armed until
        # that many fired, so they fire in the first invocations that make the call (a few more may fire at once),
        # not in redeliveries a visibility timeout later after invocations that sent nothing.
        self._forced = forced
        self._kinds = kinds
        self._random = random.Random(seed)
        self._lock = threading.Lock()

    def describe(self) -> str:
        forced = f", and every invocation until {self._forced} were hit" if self._forced else ""
        return f"{self._probability:.0%} of invocations hit at a crash point{forced} ({', '.join(self._kinds)})"

    def next(self) -> dict[str, Any] | None:
        with self._lock:
            if self._forced > 0:
                return {"kill": self._kinds[0], "nth": 1, "forced": True}
            if self._random.random() >= self._probability:
                return None
            return {"kill": self._random.choice(self._kinds), "nth": self._random.randint(1, 3)}

    def settle(self, fault: dict[str, Any] | None, fired: bool) -> None:
        """A forced fault counts once it fired: one whose invocation never made its watched call (a paced batch
        put back, a duplicate) leaves the next invocations armed, so at least N faults fire."""
        if fault is not None and fault.get("forced") and fired:
            with self._lock:
                self._forced = max(0, self._forced - 1)


def lambda_record(message: dict[str, Any], source: EventSourceSpec, region: str) -> dict[str, Any]:
    """An SQS message in the shape Lambda gives the handler."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {
            name: {
                "stringValue": value.get("StringValue"),
                "binaryValue": value.get("BinaryValue"),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": value["DataType"],
            }
            for name, value in message.get("MessageAttributes", {}).items()
        },
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": source.queue_arn,
        "awsRegion": region,
    }


def succeeded_ids(invocation: Invocation, message_ids: list[str], report_batch_item_failures: bool) -> list[str]:
    """Which messages Lambda deletes after this invocation, per the partial batch response rules."""
    if invocation.ending is not Ending.RETURNED:
        return []
    if not report_batch_item_failures:
        return list(message_ids)
    result = invocation.result
    if result is None or (isinstance(result, dict) and not result.get("batchItemFailures")):
        return list(message_ids)
    if not isinstance(result, dict) or not isinstance(result.get("batchItemFailures"), list):
        return []  # an invalid response fails the whole batch
    failed: set[str] = set()
    for item in result["batchItemFailures"]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier or identifier not in message_ids:
            return []  # an empty, null or unknown identifier fails the whole batch
        failed.add(identifier)
    return [m for m in message_ids if m not in failed]


class EventSourceRunner:
    def __init__(
        self,
        function: FunctionSpec,
        source: EventSourceSpec,
        base_environment: Mapping[str, str],
        log: IO[str] | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        self.function = function
        self.source = source
        self.stats = RunnerStats()
        self._environment = dict(base_environment)
        self._log = log
        self._faults = faults
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._instances: list[LambdaInstance] = []
        self._sqs = boto3.client("sqs")
        self._region = self._sqs.meta.region_name
        self.drained_at: float | None = None  # set by run_until_drained

    def start(self) -> EventSourceRunner:
        instances = [LambdaInstance(self.function, self._environment, self._log)
                     for _ in range(self.source.max_concurrency)]
        with ThreadPoolExecutor(len(instances)) as pool:  # cold starts side by side, as Lambda scales out
            list(pool.map(LambdaInstance.start, instances))
        for index, instance in enumerate(instances):
            self._instances.append(instance)
            thread = threading.Thread(target=self._poll, args=(instance,), name=f"poller-{index}", daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.function.timeout_s + POLL_WAIT_S + 5)
        for instance in self._instances:
            instance.close()

    def __enter__(self) -> EventSourceRunner:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def queue_depth(self) -> dict[str, int]:
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.source.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                            "ApproximateNumberOfMessagesDelayed"],
        )["Attributes"]
        return {
            "visible": int(attributes["ApproximateNumberOfMessages"]),
            "in_flight": int(attributes["ApproximateNumberOfMessagesNotVisible"]),
            "delayed": int(attributes["ApproximateNumberOfMessagesDelayed"]),
        }

    def run_until_drained(
        self, bound_s: float, progress: Callable[[float, dict[str, int]], None] | None = None, every_s: float = 2.0,
        upstream_idle: Callable[[], bool] = lambda: True,
    ) -> bool:
        """Wait until the queue is empty, no invocation runs and ``upstream_idle()`` (what feeds the queue, such as
        an outbox relay) says it is done, checked twice; or until ``bound_s`` passes. Once drained, ``drained_at``
        is when the first of those checks began (monotonic seconds): the queue was empty from then on."""
        started = time.monotonic()
        quiet_checks, last_progress, quiet_since = 0, 0.0, started
        while time.monotonic() - started < bound_s:
            checked_at = time.monotonic()
            depth = self.queue_depth()
            with self.stats._lock:
                busy = self.stats.in_flight
            quiet = sum(depth.values()) == 0 and busy == 0 and upstream_idle()
            quiet_checks = quiet_checks + 1 if quiet else 0
            quiet_since = checked_at if quiet_checks == 1 else quiet_since
            if quiet_checks >= 2:
                self.drained_at = quiet_since
                return True
            elapsed = time.monotonic() - started
            if progress is not None and elapsed - last_progress >= every_s:
                progress(elapsed, depth)
                last_progress = elapsed
            self._stop.wait(0.25)
        return False

    def _poll(self, instance: LambdaInstance) -> None:
        while not self._stop.is_set():
            messages = self._sqs.receive_message(
                QueueUrl=self.source.queue_url,
                MaxNumberOfMessages=min(MAX_RECEIVE, self.source.batch_size),
                WaitTimeSeconds=POLL_WAIT_S,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            with self.stats._lock:
                self.stats.receives += 1
                self.stats.empty_receives += not messages
            if messages:
                self._deliver(instance, messages)

    def _deliver(self, instance: LambdaInstance, messages: list[Any]) -> None:
        fault = self._faults.next() if self._faults else None
        with self.stats._lock:
            self.stats.in_flight += 1
            self.stats.invocations += 1
            self.stats.records_delivered += len(messages)
            self.stats.faults_armed += fault is not None
        try:
            event = {"Records": [lambda_record(m, self.source, self._region) for m in messages]}
            invocation = instance.invoke(event, fault)
            if self._faults is not None:
                self._faults.settle(fault, invocation.fault_fired)
            ids = [m["MessageId"] for m in messages]
            done = set(succeeded_ids(invocation, ids, self.source.report_batch_item_failures))
            handles = [m for m in messages if m["MessageId"] in done]
            for start in range(0, len(handles), MAX_RECEIVE):
                chunk = handles[start : start + MAX_RECEIVE]
                self._sqs.delete_message_batch(
                    QueueUrl=self.source.queue_url,
                    Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)],
                )
            with self.stats._lock:
                self.stats.records_deleted += len(done)
                self.stats.records_failed += len(messages) - len(done)
                self.stats.function_errors += invocation.ending is Ending.RAISED
                self.stats.workers_killed += invocation.ending is Ending.KILLED
                self.stats.timeouts += invocation.ending is Ending.TIMED_OUT
        finally:
            with self.stats._lock:
                self.stats.in_flight -= 1
