"""A burst during a stretch of DynamoDB or SQS trouble: the consumer's DynamoDB and SQS calls go through the
slow-services proxy, which throttles them or answers them late (after carrying them out) for a stretch, while
Lambda's event source is played with invocations killed at their deadline and, for a share of them, right after
a delayed copy was sent (between the copy and the acknowledgement).

What it reports is counted outside the consumer: emails per key from the emulator's SES, jobs in the DLQ, the
job queue's peak depth (sampled), and keys left UNKNOWN that SES never saw. A demo phase can call
:func:`run_fault_burst` with the deployed consumer, as the tests do with a consumer staged from the runtime.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import IO, Any

import boto3

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.schema import Ledger, Status

from ...emulator.slow_services import LATE, Rule, SlowServices
from ...lambda_service.instances import FunctionSpec
from ...lambda_service.sqs_source import EventSourceSpec, FaultPlan
from ..workload import build_workload, keys_by_emails, keys_sent_twice
from .burst_drain import drain_burst, queue_depth

# The queue may hold at most this many messages per job enqueued (the guarantees page's bound is two per message).
DEPTH_AIM = 2.0
SAMPLE_EVERY_S = 0.2


@dataclass(frozen=True)
class Stretch:
    """A stretch of trouble: what the proxy does to the consumer's DynamoDB and SQS calls, and for how long."""

    name: str
    rules: tuple[Rule, ...]
    seconds: float
    late_s: float = 0.15  # past the 120 ms read timeouts of a 3 s function

    def describe(self) -> str:
        return f"{self.name} for {self.seconds:g} s"


def dynamodb_throttling(seconds: float) -> Stretch:
    return Stretch("DynamoDB throttling every call",
                   (Rule("dynamodb", None, "ProvisionedThroughputExceededException"),), seconds)


def late_answers(seconds: float, late_s: float = 0.15) -> Stretch:
    return Stretch(f"DynamoDB and SQS answering {late_s * 1000:.0f} ms late (carried out, the answer lost)",
                   (Rule("dynamodb", None, LATE), Rule("sqs", None, LATE)), seconds, late_s)


@dataclass
class FaultBurstReport:
    stretch: str
    policy: str
    jobs: int
    keys: int
    emails_per_key: dict[int, int]
    keys_sent_twice: list[str]
    keys_lost: list[str]
    dead_letters: int
    peak_depth: int
    unknown_keys: list[str]
    unknown_never_seen: list[str]  # UNKNOWN although SES accepted nothing for the key: a loss
    drain_s: float
    drained: bool
    runner: dict[str, int]
    proxy_hits: dict[str, int] = field(default_factory=dict)  # the consumer's calls that met the stretch's fault
    proxy_requests: dict[str, int] = field(default_factory=dict)  # every call the consumer made, by service
    subjects: frozenset[str] = field(default=frozenset(), repr=False)  # the burst's emails, to tell them apart

    @property
    def guarantee_held(self) -> bool:
        """Drained, every key once, nothing dead-lettered, nothing UNKNOWN that SES never saw."""
        return (self.drained and not self.keys_sent_twice and not self.keys_lost and self.dead_letters == 0
                and not self.unknown_never_seen)

    @property
    def ok(self) -> bool:
        """The guarantee held, and the queue stayed within twice the jobs."""
        return self.guarantee_held and self.peak_depth <= DEPTH_AIM * self.jobs

    def problems(self) -> str:
        """What broke the promise, in a few words (empty when nothing did)."""
        found = [f"{len(self.keys_sent_twice)} sent twice" if self.keys_sent_twice else "",
                 f"{len(self.keys_lost)} lost" if self.keys_lost else "",
                 f"{self.dead_letters} in the DLQ" if self.dead_letters else "",
                 f"queue peak {self.peak_depth / max(1, self.jobs):.2f}x the jobs (bound {DEPTH_AIM:g}x)"
                 if self.peak_depth > DEPTH_AIM * self.jobs else "",
                 f"{len(self.unknown_never_seen)} UNKNOWN that SES never saw" if self.unknown_never_seen else "",
                 "" if self.drained else f"not drained in {self.drain_s:.0f} s"]
        return ", ".join(problem for problem in found if problem)

    def as_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "ok": self.ok}
        del data["subjects"]
        return data

    def lines(self) -> list[str]:
        return [
            f"  {self.stretch}, {self.policy}: {self.jobs} jobs for {self.keys} keys",
            f"    emails per key: {self.emails_per_key}; sent twice {len(self.keys_sent_twice)}; lost "
            f"{len(self.keys_lost)}; in the DLQ {self.dead_letters}; UNKNOWN {len(self.unknown_keys)} (SES never "
            f"saw {len(self.unknown_never_seen)})",
            f"    queue depth peak {self.peak_depth} ({self.peak_depth / max(1, self.jobs):.2f} x the jobs, aim "
            f"{DEPTH_AIM:g} x); drained {'in' if self.drained else 'NOT within'} {self.drain_s:.1f} s; "
            f"invocations {self.runner.get('invocations', 0)}, killed {self.runner.get('workers_killed', 0)}, "
            f"timed out {self.runner.get('timeouts', 0)}",
        ]


class _DepthSampler:
    """The job queue's depth (visible, in flight and delayed), sampled until stopped; keeps the peak."""

    def __init__(self, queue_url: str) -> None:
        self._sqs = boto3.client("sqs")
        self._url = queue_url
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="depth-sampler", daemon=True)

    def __enter__(self) -> _DepthSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY_S):
            attributes = self._sqs.get_queue_attributes(QueueUrl=self._url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed"])["Attributes"]
            self.peak = max(self.peak, sum(int(v) for v in attributes.values()))


def run_fault_burst(
    function: FunctionSpec, source: EventSourceSpec, environment: dict[str, str], dead_letter_queue_url: str,
    table_name: str, sent_subjects: Callable[[], list[str]], rate: float, keys: int, seed: int, stretch: Stretch,
    log: IO[str] | None = None, bound_s: float = 600, copy_kills: float = 0.2, first: int = 700_000,
) -> FaultBurstReport:
    """Enqueue ``keys`` jobs (with the workload's duplicates and re-enqueues) while SES accepts ``rate`` emails a
    second and the consumer's DynamoDB and SQS are in ``stretch``'s trouble; a share ``copy_kills`` of the
    invocations is killed right after sending a delayed copy. Plays the event source until the queue is empty."""
    workload = build_workload(keys, seed, first=first, poison=False)
    bodies = workload.first_wave + workload.reenqueued
    sqs = boto3.client("sqs")
    dead_before = queue_depth(sqs, dead_letter_queue_url)
    proxy = SlowServices(environment["AWS_ENDPOINT_URL"], late_s=stretch.late_s).start()
    # Only the consumer goes through the proxy: the event source's own receives and deletes are Lambda's.
    slowed = replace(function, environment={**function.environment, "AWS_ENDPOINT_URL": proxy.endpoint})
    faults = FaultPlan(copy_kills, seed, ("after_copy",))

    def start_the_stretch() -> None:
        # The stretch starts once the burst reaches DynamoDB (cold starts come first).
        warm_by = time.monotonic() + bound_s
        while not proxy.requests["dynamodb"] and time.monotonic() < warm_by:
            time.sleep(0.05)
        proxy.fault(*stretch.rules, for_s=stretch.seconds)

    try:
        with _DepthSampler(source.queue_url) as sampler:
            run = drain_burst(slowed, source, environment, sqs, bodies, rate, log, bound_s, faults,
                              once_enqueued=start_the_stretch)
    finally:
        proxy.stop()
    per_key = workload.emails_per_key(sent_subjects())
    unknown = _unknown_keys(table_name, set(per_key))
    return FaultBurstReport(
        stretch=stretch.describe(), policy=ConsumerConfig.from_env(function.environment).delivery.value,
        jobs=len(bodies), keys=len(per_key), emails_per_key=keys_by_emails(per_key),
        keys_sent_twice=keys_sent_twice(per_key),
        keys_lost=sorted(k for k, n in per_key.items() if n == 0 and k not in unknown),
        dead_letters=queue_depth(sqs, dead_letter_queue_url) - dead_before, peak_depth=sampler.peak,
        unknown_keys=sorted(unknown), unknown_never_seen=sorted(k for k in unknown if per_key[k] == 0),
        drain_s=run.drain_s, drained=run.drained, runner=run.runner,
        proxy_hits={" ".join(k): v for k, v in proxy.hits.items()}, proxy_requests=dict(proxy.requests),
        subjects=frozenset(workload.subject_to_key),
    )


def _unknown_keys(table_name: str, keys: set[str]) -> set[str]:
    dynamodb = boto3.client("dynamodb")
    found: set[str] = set()
    for page in dynamodb.get_paginator("scan").paginate(TableName=table_name):
        for item in page["Items"]:
            key = item[Ledger.KEY]["S"]
            if key in keys and item[Ledger.STATUS]["S"] == Status.UNKNOWN.value:
                found.add(key)
    return found

