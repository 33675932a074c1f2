"""Who waits during a flood: the bulk lane flooded at 40 x SES's rate by one tenant while urgent jobs
(``priority: urgent``, the urgent lane) and a second, quiet tenant's jobs arrive, each one's time to SES against
its time alone (the same arrivals with no flood).

Both lanes' consumers run as deployed (the local event sources of a stack with ``urgent_lane``), SES (the
emulator's) accepts R emails a second, and every time is read from the emulator's log of sends over HTTP (when SES
accepted the email, less when the producer enqueued its job), never from the consumer's output. The guarantee:
every key once, none in either lane's DLQ, each send naming its job's tenant when the pipeline sends tenants. The
aim, a performance goal and not part of the guarantee: an urgent job's and a quiet tenant's p95 during the flood
at most twice alone.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import boto3

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.priority import DEFAULT_PRIORITY, Priority
from sendonce_producer import EmailJob, Pipeline

from ...emulator.ses_limits import SES_RATE
from ...lambda_service.deployed_stack import DeployedConsumer
from ...lambda_service.stack_runners import StackRunners
from ..phase import PhaseReport
from ..workload import SENDER, keys_by_emails
from .burst_drain import queue_depth

FLOOD_FACTOR = 40  # the flood arrives at this many times SES's rate
WAIT_AIM = 2.0  # an urgent job's and a quiet tenant's p95 time to SES during the flood, at most this x alone
SUBJECT_PREFIX = "Flood phase: "  # every email of the scenario's, told apart from the other phases'
URGENT, QUIET = "urgent", "quiet"  # who waits: urgent jobs (no tenant) and the quiet tenant's bulk jobs
RUNS = ("alone", "flood")
TICK_S = 0.1  # the flood is enqueued in a chunk every tick, 40 x R a second in all


@dataclass(frozen=True)
class FloodPlan:
    flood_s: float  # how long the flood arrives (FLOOD_FACTOR x R jobs a second)
    arrivals: int  # urgent jobs, and as many of the quiet tenant's, in each run
    gap_s: float  # an urgent job in the first half of each gap, a quiet tenant's in the second, at random times
    lead_s: float = 1.0  # from the flood's start to the first arrival, so they meet a full queue

    def flood_jobs(self, rate: float) -> int:
        return round(FLOOD_FACTOR * rate * self.flood_s)


@dataclass(frozen=True)
class Lanes:
    """The two deployed consumers of a pipeline with ``urgent_lane``, and the tenants the flood phase uses."""

    bulk: DeployedConsumer
    urgent: DeployedConsumer
    flood_tenant: str
    quiet_tenant: str

    def config(self, consumer: DeployedConsumer) -> ConsumerConfig:
        return ConsumerConfig.from_env(consumer.function.environment)

    @property
    def dead_letter_queues(self) -> tuple[str, str]:
        return self.config(self.bulk).dead_letter_queue_url, self.config(self.urgent).dead_letter_queue_url

    def pipeline(self) -> Pipeline:
        return Pipeline(queue_url=self.bulk.source.queue_url, table_name="-",
                        urgent_queue_url=self.urgent.source.queue_url)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least ``q`` of the values at or below it (0.0 for none)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else 0.0


@dataclass
class FloodReport(PhaseReport):
    rate: float
    flood_jobs: int
    arrivals: int  # urgent jobs, and as many quiet-tenant jobs, in each run
    flood_tenant: str
    quiet_tenant: str
    emails_per_key: dict[int, int]
    keys_sent_twice: list[str]
    keys_lost: list[str]
    dead_letters: int  # both lanes' DLQs, what the scenario added
    wrong_tenant: list[str]  # keys whose send named another tenant than its job's (or one when none was due)
    flood_drain_s: float  # from the flood's start until every job of the run was sent
    waits_s: dict[str, dict[str, list[float]]]  # URGENT or QUIET -> "alone" or "flood" -> each job's time to SES
    drained: bool = True  # False: a run's bound passed first
    function_timeout_s: float = 0.0  # the bulk consumer's, as deployed
    batch_size: int = 0  # the bulk event source's

    @property
    def ok(self) -> bool:
        """The guarantee, flood or not: every key once, none dead-lettered, each send under its job's tenant."""
        return (self.drained and not self.keys_sent_twice and not self.keys_lost and self.dead_letters == 0
                and not self.wrong_tenant)

    def problems(self) -> str:
        """What broke the guarantee, in one line ("" when nothing did)."""
        found = [f"{len(self.keys_sent_twice)} keys sent twice" if self.keys_sent_twice else "",
                 f"{len(self.keys_lost)} keys not sent" if self.keys_lost else "",
                 f"{self.dead_letters} jobs in the DLQs" if self.dead_letters else "",
                 f"{len(self.wrong_tenant)} sent under another tenant" if self.wrong_tenant else "",
                 "" if self.drained else "not drained within its bound"]
        return ", ".join(problem for problem in found if problem)

    def failure(self) -> str:
        return "flood: " + self.problems()

    def summary(self) -> str:
        return (f"flood: {sum(self.emails_per_key.values())} keys each once through {self.flood_jobs} bulk jobs, "
                "none in the DLQs")

    def p(self, who: str, run: str, q: float) -> float:
        return percentile(self.waits_s[who][run], q)

    def ratio(self, who: str, q: float = 0.95) -> float:
        """``who``'s time to SES during the flood over alone, at the ``q`` percentile."""
        return self.p(who, "flood", q) / max(1e-3, self.p(who, "alone", q))

    def missed_aims(self) -> list[str]:
        return [f"{self._who(who)} p95 time to SES during the flood {self.ratio(who):.1f}x alone "
                f"({self.p(who, 'flood', 0.95):.2f} s against {self.p(who, 'alone', 0.95):.2f} s; aim {WAIT_AIM:g}x)"
                for who in (URGENT, QUIET) if self.ratio(who) > WAIT_AIM]

    def _who(self, who: str) -> str:
        return "an urgent job's" if who == URGENT else f"the quiet tenant {self.quiet_tenant}'s"

    def as_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "ok": self.ok, "missed_aims": self.missed_aims()}
        data["waits_s"] = {who: {run: [round(s, 3) for s in waits] for run, waits in runs.items()}
                           for who, runs in self.waits_s.items()}
        data["times_s"] = {who: {run: {"p50": round(self.p(who, run, 0.5), 3), "p95": round(self.p(who, run, 0.95), 3)}
                                 for run in RUNS} | {"p95_ratio": round(self.ratio(who), 2)}
                           for who in (URGENT, QUIET)}
        return data

    def lines(self) -> list[str]:
        rows = [f"    {self._who(who)} time to SES: p50 {self.p(who, 'flood', 0.5):.2f} s, p95 "
                f"{self.p(who, 'flood', 0.95):.2f} s during the flood; alone p50 {self.p(who, 'alone', 0.5):.2f} s, "
                f"p95 {self.p(who, 'alone', 0.95):.2f} s: p95 {self.ratio(who):.1f}x alone (aim at most {WAIT_AIM:g}x)"
                for who in (URGENT, QUIET)]
        return [
            f"  flood: {self.flood_jobs} bulk jobs of tenant {self.flood_tenant} at {FLOOD_FACTOR} x SES's "
            f"{self.rate:g} emails/s, while {self.arrivals} urgent jobs and {self.arrivals} of tenant "
            f"{self.quiet_tenant}'s arrive (and the same {2 * self.arrivals} alone); drained in "
            f"{self.flood_drain_s:.1f} s (bulk batches of {self.batch_size}, function timeout "
            f"{self.function_timeout_s:g} s)",
            f"    emails per key: {self.emails_per_key}; sent twice {len(self.keys_sent_twice)}; lost "
            f"{len(self.keys_lost)}; in the DLQs {self.dead_letters}; sent under another tenant "
            f"{len(self.wrong_tenant)}",
            *rows,
        ]


@dataclass
class _Run:
    """One run's jobs: who each key is, its tenant, and when it was enqueued (epoch seconds)."""

    who: dict[str, str] = field(default_factory=dict)  # key -> URGENT, QUIET or "bulk"
    tenant: dict[str, str | None] = field(default_factory=dict)
    enqueued_at: dict[str, float] = field(default_factory=dict)


# An urgent job is a sign-in code or a reset link: worthless after this long, so it expires rather than arrive stale.
URGENT_EXPIRES_AFTER = timedelta(minutes=10)


def _job(key: str, tenant: str | None, priority: Priority) -> EmailJob:
    expires_at = datetime.now(UTC) + URGENT_EXPIRES_AFTER if priority is Priority.URGENT else None
    return EmailJob(key, SENDER, [f"{key.replace(':', '-')}@example.org"], subject=SUBJECT_PREFIX + key,
                    text="Sent once, flood or not.", tenant=tenant, priority=priority, expires_at=expires_at)


def _schedule(plan: FloodPlan, rate: float, run: str, seed: int) -> list[tuple[float, list[tuple[str, str]]]]:
    """(offset in seconds, [(key, who)]) in the order they are enqueued: the flood's chunks, then the arrivals."""
    steps: list[tuple[float, list[tuple[str, str]]]] = []
    if run == "flood":
        total, per_tick = plan.flood_jobs(rate), max(1, round(FLOOD_FACTOR * rate * TICK_S))
        for tick, start in enumerate(range(0, total, per_tick)):
            steps.append((tick * TICK_S, [(f"flood:{seed}:{n}", "bulk") for n in range(start,
                                                                                      min(total, start + per_tick))]))
    # Each arrival at a random time within its half of the gap: arrivals a fixed 2 s apart would all meet the
    # instances' send cadences at one phase, so a run's p95 would be one draw of that phase, not a percentile of
    # the waits jobs arriving at any time meet. Seeded, so alone and flood draw alike.
    draw = random.Random(seed).random
    for n in range(plan.arrivals):
        at = plan.lead_s + n * plan.gap_s
        steps.append((at + draw() * plan.gap_s / 2, [(f"{URGENT}:{run}:{seed}:{n}", URGENT)]))
        steps.append((at + (1 + draw()) * plan.gap_s / 2, [(f"{QUIET}:{run}:{seed}:{n}", QUIET)]))
    return sorted(steps, key=lambda step: step[0])


def _enqueue(lanes: Lanes, plan: FloodPlan, rate: float, run: str, seed: int) -> tuple[_Run, float]:
    pipeline, jobs = lanes.pipeline(), _Run()
    tenants = {"bulk": lanes.flood_tenant, QUIET: lanes.quiet_tenant, URGENT: None}
    started = time.time()
    for offset, batch in _schedule(plan, rate, run, seed):
        time.sleep(max(0.0, started + offset - time.time()))  # arrivals at their times, not a wait for a result
        now = time.time()
        for key, who in batch:
            jobs.who[key], jobs.tenant[key], jobs.enqueued_at[key] = who, tenants[who], now
        failures = pipeline.enqueue_many([_job(key, tenants[who], Priority.URGENT if who == URGENT else
                                               DEFAULT_PRIORITY) for key, who in batch])
        if failures:
            raise RuntimeError(f"the emulator refused jobs: {failures}")
    return jobs, started


def sends_by_key(ses_sends: Callable[[int], list[dict[str, Any]]], since: int,
                 prefix: str = SUBJECT_PREFIX) -> dict[str, list[dict[str, Any]]]:
    """The emulator's sends since ``since`` whose subject starts with ``prefix``, by the key the subject names."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for send in ses_sends(since):
        if str(send["subject"]).startswith(prefix):
            by_key.setdefault(str(send["subject"]).removeprefix(prefix), []).append(send)
    return by_key


def _wait_sent(lanes: Lanes, ses_sends: Callable[[int], list[dict[str, Any]]], since: int, keys: set[str],
               bound_s: float) -> tuple[dict[str, list[dict[str, Any]]], bool]:
    """Poll the send log (over HTTP) until every key of ``keys`` was sent and both queues are empty, or the bound."""
    sqs, deadline = boto3.client("sqs"), time.monotonic() + bound_s
    while True:
        sent = sends_by_key(ses_sends, since)
        if keys <= set(sent) and all(queue_depth(sqs, q.source.queue_url) == 0 for q in (lanes.bulk, lanes.urgent)):
            return sent, True
        if time.monotonic() > deadline:
            return sent, False
        time.sleep(0.25)


def run_flood(lanes: Lanes, environment: Mapping[str, str], ses_sends: Callable[[int], list[dict[str, Any]]],
              rate: float, plan: FloodPlan, seed: int, log: IO[str] | None = None,
              bound_s: float = 300) -> FloodReport:
    """The arrivals alone, then the same arrivals through the flood, both lanes' consumers running throughout
    while SES accepts ``rate`` emails a second."""
    sqs = boto3.client("sqs")
    dead_before = sum(queue_depth(sqs, url) for url in lanes.dead_letter_queues)
    ses_tenants = lanes.config(lanes.bulk).ses_tenants
    waits: dict[str, dict[str, list[float]]] = {URGENT: {}, QUIET: {}}
    per_key: Counter[str] = Counter()
    wrong_tenant: list[str] = []
    drained, flood_drain_s = True, 0.0
    SES_RATE.limit(rate)
    runners = StackRunners(environment, log).start([lanes.bulk, lanes.urgent], [])
    try:
        for run in RUNS:
            since = len(ses_sends(0))
            jobs, started = _enqueue(lanes, plan, rate, run, seed)
            sent, done = _wait_sent(lanes, ses_sends, since, set(jobs.who), bound_s)
            drained = drained and done
            if run == "flood":
                flood_drain_s = max((s["acceptedAt"] for sends in sent.values() for s in sends),
                                    default=started) - started
            for key, who in jobs.who.items():
                sends = sent.get(key, [])
                per_key[key] = len(sends)
                wrong_tenant += [key for s in sends[:1]
                                 if s.get("tenantName") != (jobs.tenant[key] if ses_tenants else None)]
                if who in waits and sends:
                    waits[who].setdefault(run, []).append(sends[0]["acceptedAt"] - jobs.enqueued_at[key])
    finally:
        runners.stop()
        SES_RATE.limit(None)
    for runs in waits.values():
        for run in RUNS:
            runs.setdefault(run, [])
    return FloodReport(
        rate=rate, flood_jobs=plan.flood_jobs(rate), arrivals=plan.arrivals, flood_tenant=lanes.flood_tenant,
        quiet_tenant=lanes.quiet_tenant, emails_per_key=keys_by_emails(per_key),
        keys_sent_twice=sorted(k for k, n in per_key.items() if n > 1),
        keys_lost=sorted(k for k, n in per_key.items() if n == 0),
        dead_letters=sum(queue_depth(sqs, url) for url in lanes.dead_letter_queues) - dead_before,
        wrong_tenant=sorted(wrong_tenant), flood_drain_s=flood_drain_s, waits_s=waits, drained=drained,
        function_timeout_s=lanes.bulk.function.timeout_s, batch_size=lanes.bulk.source.batch_size)

