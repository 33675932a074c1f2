"""When SES stops sending, mid-flood: one tenant's sending is disabled (as SES's reputation findings disable it, the
emulator's reputation control) for a stretch while its bulk jobs flood the queue at 40 x SES's rate and a second,
quiet tenant's jobs arrive; as that stretch ends, the account's sending is paused (``PutAccountSendingAttributes``)
for as long while urgent jobs, more of the quiet tenant's and one-time codes valid a few seconds (``expiresAt``)
arrive. Both lanes' consumers run as deployed: each lane learns each stop from one refusal and parks the stopped
jobs in the waiting room; the schedule watch (its rule played every minute by the demo's standing runners) sends
each stop's backlog back once SES's own status says it sends again.

Counted from the emulator's log of sends over HTTP, never from the consumer's output. The guarantee: every key once,
none in either lane's DLQ, no code sent (each waited past its expiry) and each recorded ``EXPIRED``, and the quiet
tenant's time to SES while the other tenant is stopped within twice its time alone (or within a second of it: at a
p95 under a second the host's scheduling is the difference). Reported beside it: when each stop's backlog started
moving after SES sent again, with SQS's and EventBridge's real timings, and the SES requests the stops cost.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

import boto3

from sendonce_contract.priority import DEFAULT_PRIORITY, Priority
from sendonce_contract.schema import Status
from sendonce_producer import EmailJob

from ...emulator.request_counts import REQUESTS
from ...emulator.server import LocalAws
from ...emulator.ses_limits import SES_RATE
from ...emulator.ses_tenant_backend import DISABLED, ENABLED
from ...emulator.ses_tenants import REPUTATION_CONTROL_PATH
from ...lambda_service.stack_runners import StackRunners
from ..report_build import ledger_records
from ..workload import SENDER, keys_by_emails
from .burst_drain import queue_depth
from .flood import FLOOD_FACTOR, TICK_S, Lanes, sends_by_key
from .ses_stops_report import CODE_LIFETIME_S, SUBJECT_PREFIX, SesStopsReport

CAUSE = "played by the demo: a reputation finding on this tenant"
QUIET, URGENT, FLOOD = "quiet", "urgent", "flood"


@dataclass(frozen=True)
class StopsPlan:
    pause_s: float  # how long each stop lasts: the tenant's, then the account's
    flood_s: float  # the stopped tenant's jobs arrive for this long at FLOOD_FACTOR x SES's rate
    arrivals: int  # the quiet tenant's jobs through each stop and alone; urgent jobs through the account's stop
    codes: int = 10  # one-time codes enqueued as the account's pause begins, each expiring CODE_LIFETIME_S later

    def flood_jobs(self, rate: float) -> int:
        return round(FLOOD_FACTOR * rate * self.flood_s)


@dataclass
class _Jobs:
    """The phase's jobs: who each key is, its tenant, and when it was enqueued (epoch seconds)."""

    who: dict[str, str] = field(default_factory=dict)
    tenant: dict[str, str | None] = field(default_factory=dict)
    enqueued_at: dict[str, float] = field(default_factory=dict)


def _arrivals(prefix: str, whos: tuple[str, ...], count: int, span_s: float, seed: int) -> list[tuple[float, str, str]]:
    """``count`` arrivals of each of ``whos`` at random times through ``span_s`` (seeded: alone and stopped draw
    alike), as (offset, key, who)."""
    draw, gap = random.Random(seed).random, span_s / max(1, count)
    return sorted((n * gap + draw() * gap, f"{who}:{prefix}:{seed}:{n}", who) for n in range(count) for who in whos)


def _enqueue(lanes: Lanes, jobs: _Jobs, schedule: list[tuple[float, str, str]], tenants: dict[str, str | None]) -> None:
    """Each arrival at its time (a schedule, not a wait for a result); those due at one time in one request."""
    pipeline, started = lanes.pipeline(), time.time()
    for offset, due in itertools.groupby(schedule, key=lambda arrival: arrival[0]):
        time.sleep(max(0.0, started + offset - time.time()))
        batch = [(key, who) for _, key, who in due]
        for key, who in batch:
            jobs.who[key], jobs.tenant[key], jobs.enqueued_at[key] = who, tenants[who], time.time()
        failures = pipeline.enqueue_many([
            EmailJob(key, SENDER, [f"{key.replace(':', '-')}@example.org"], subject=SUBJECT_PREFIX + key,
                     text="Sent once, whoever SES stopped.", tenant=tenants[who],
                     priority=Priority.URGENT if who == URGENT else DEFAULT_PRIORITY) for key, who in batch])
        if failures:
            raise RuntimeError(f"the emulator refused jobs: {failures}")


def _enqueue_codes(lanes: Lanes, count: int, seed: int) -> list[str]:
    """One-time codes on the urgent lane, each expiring CODE_LIFETIME_S from now: their keys."""
    expires_at = datetime.now(UTC) + timedelta(seconds=CODE_LIFETIME_S)
    keys = [f"code:{seed}:{n}" for n in range(count)]
    failures = lanes.pipeline().enqueue_many([
        EmailJob(key, SENDER, [f"{key.replace(':', '-')}@example.org"], subject=SUBJECT_PREFIX + key,
                 text="Your one-time code: 246810. It works for the next few seconds.", expires_at=expires_at,
                 priority=Priority.URGENT) for key in keys])
    if failures:
        raise RuntimeError(f"the emulator refused jobs: {failures}")
    return keys


def _flood(rate: float, plan: StopsPlan, seed: int) -> list[tuple[float, str, str]]:
    per_tick = max(1, round(FLOOD_FACTOR * rate * TICK_S))
    return [(n // per_tick * TICK_S, f"{FLOOD}:{seed}:{n}", FLOOD) for n in range(plan.flood_jobs(rate))]


def _every_message(sqs: Any, queue_url: str) -> int:
    """Messages in the queue: visible, in flight and delayed."""
    return sum(int(value) for value in sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"].values())


def _wait_sent(aws: LocalAws, lanes: Lanes, since: int, keys: set[str], bound: float, settled: bool = True) -> bool:
    """Poll the send log (over HTTP) until every key of ``keys`` was sent and, if ``settled``, both queues hold no
    message, delayed copies included; or until ``bound`` (monotonic seconds) passes."""
    sqs = boto3.client("sqs")
    while True:
        sent = sends_by_key(aws.ses_sends, since, SUBJECT_PREFIX)
        if keys <= set(sent) and (not settled or all(
                _every_message(sqs, q.source.queue_url) == 0 for q in (lanes.bulk, lanes.urgent))):
            return True
        if time.monotonic() > bound:
            return False
        time.sleep(0.25)


def _first_after(sent: dict[str, list[dict[str, Any]]], keys: list[str], since: float) -> float:
    """Seconds from ``since`` to the first email of ``keys`` SES accepted after it (-1: none was)."""
    times = [s["acceptedAt"] for key in keys for s in sent.get(key, []) if s["acceptedAt"] >= since]
    return min(times) - since if times else -1.0


def _set_tenant(aws: LocalAws, tenant: str, status: str) -> None:
    aws.control(REPUTATION_CONTROL_PATH, {"tenantName": tenant, "status": status, "cause": CAUSE})


def run_ses_stops(lanes: Lanes, aws: LocalAws, rate: float, plan: StopsPlan, seed: int, log: IO[str] | None = None,
                  bound_s: float = 300) -> SesStopsReport:
    """The quiet tenant's arrivals alone, then through the other tenant's stop (with its flood), then through the
    account's stop with urgent arrivals; both lanes' consumers running throughout while SES accepts ``rate``
    emails a second."""
    sqs, ses = boto3.client("sqs"), boto3.client("sesv2")
    dead_before = sum(queue_depth(sqs, url) for url in lanes.dead_letter_queues)
    tenants: dict[str, str | None] = {FLOOD: lanes.flood_tenant, QUIET: lanes.quiet_tenant, URGENT: None}
    jobs, since, bound = _Jobs(), len(aws.ses_sends(0)), time.monotonic() + bound_s
    requests_before = REQUESTS.snapshot()
    drained, resumed_s, alone_keys, sent, codes = True, 0.0, set(), {}, []
    moving_after_s: dict[str, float] = {}
    runners: StackRunners | None = None
    try:
        SES_RATE.limit(rate)
        runners = StackRunners(aws.environment, log).start([lanes.bulk, lanes.urgent], [])
        _enqueue(lanes, jobs, _arrivals("alone", (QUIET,), plan.arrivals, plan.pause_s, seed), tenants)
        alone_keys = set(jobs.who)
        drained = _wait_sent(aws, lanes, since, alone_keys, bound)
        stopped_at = time.time()
        _set_tenant(aws, lanes.flood_tenant, DISABLED)
        _enqueue(lanes, jobs, sorted(_flood(rate, plan, seed) + _arrivals("stopped", (QUIET,), plan.arrivals,
                                                                           plan.pause_s, seed)), tenants)
        time.sleep(max(0.0, stopped_at + plan.pause_s - time.time()))  # the stop's end, by the schedule
        _set_tenant(aws, lanes.flood_tenant, ENABLED)
        tenant_resumed_at = time.time()
        # The quiet tenant's jobs of the tenant's stop sent before the account's begins, so none of their waits
        # is the account's.
        quiet = {key for key, who in jobs.who.items() if who == QUIET}
        drained = _wait_sent(aws, lanes, since, quiet, bound, settled=False) and drained
        paused_at = time.time()
        ses.put_account_sending_attributes(SendingEnabled=False)
        codes = _enqueue_codes(lanes, plan.codes, seed)
        _enqueue(lanes, jobs, _arrivals("paused", (QUIET, URGENT), plan.arrivals, plan.pause_s, seed + 1), tenants)
        time.sleep(max(0.0, paused_at + plan.pause_s - time.time()))
        ses.put_account_sending_attributes(SendingEnabled=True)
        resumed_at = time.time()
        drained = _wait_sent(aws, lanes, since, set(jobs.who), bound) and drained
        sent = sends_by_key(aws.ses_sends, since, SUBJECT_PREFIX)
        resumed_s = max((s["acceptedAt"] for sends in sent.values() for s in sends), default=resumed_at) - resumed_at
        moving_after_s = {
            f"tenant {lanes.flood_tenant}": _first_after(sent, [k for k, w in jobs.who.items() if w == FLOOD],
                                                         tenant_resumed_at),
            "the account": _first_after(sent, [k for k in jobs.who if ":paused:" in k], resumed_at)}
    finally:
        # Each undone alone, so one that fails leaves none of the others for the phases after this one.
        for undo in (lambda: ses.put_account_sending_attributes(SendingEnabled=True),
                     lambda: _set_tenant(aws, lanes.flood_tenant, ENABLED),
                     lambda: runners.stop() if runners is not None else None,
                     lambda: SES_RATE.limit(None)):
            with contextlib.suppress(Exception):  # the phase's own error, if any, is the one to see
                undo()
    requests = REQUESTS.snapshot() - requests_before
    per_key = Counter({key: len(sent.get(key, [])) for key in jobs.who})
    expired = [r for r in ledger_records(lanes.config(lanes.urgent).table_name, codes).values()
               if r.status == Status.EXPIRED.value]
    waits: dict[str, list[float]] = {"alone": [], "tenant_stopped": []}
    for key, who in jobs.who.items():
        if who == QUIET and sent.get(key) and ":paused:" not in key:
            waits["alone" if key in alone_keys else "tenant_stopped"].append(
                sent[key][0]["acceptedAt"] - jobs.enqueued_at[key])
    return SesStopsReport(
        rate=rate, pause_s=plan.pause_s, flood_jobs=plan.flood_jobs(rate), arrivals=plan.arrivals,
        flood_tenant=lanes.flood_tenant, quiet_tenant=lanes.quiet_tenant, emails_per_key=keys_by_emails(per_key),
        keys_sent_twice=sorted(k for k, n in per_key.items() if n > 1),
        keys_lost=sorted(k for k, n in per_key.items() if n == 0),
        dead_letters=sum(queue_depth(sqs, url) for url in lanes.dead_letter_queues) - dead_before,
        waits_s=waits, ses_requests=requests["sesv2", "SendEmail"], sends=sum(per_key.values()),
        resumed_s=resumed_s, moving_after_s=moving_after_s, codes=len(codes),
        codes_sent=sum(len(sent.get(key, [])) for key in codes), codes_expired=len(expired), drained=drained)
