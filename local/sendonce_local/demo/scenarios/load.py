"""A burst far beyond SES's sending rate: SES (the emulator's, limited to R emails a second and throttling the rest
with SES's own error) against a consumer run as Lambda's event source would run it, with several pollers.

What it reports is counted outside the consumer: emails per key from the emulator's SES, jobs in the DLQ, time to
drain, the sent rate against R, throttles per email, invocations and AWS calls per email.

Its aims are the burst's, once under way: the rate between SES's first and last accept, the drain from SES's first
accept (the instances' cold starts before it are shown apart), and the SQS requests of the pipeline's own queues
(the job queue and its DLQ). A deployed stack's other queues (the evidence queue its recorder reads SES's events
from) cost requests per email whatever the pacing does: they are shown apart, as are the pollers' empty receives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import boto3

from ...emulator.request_counts import REQUESTS, queue_name
from ...lambda_service.instances import FunctionSpec
from ...lambda_service.sqs_source import EventSourceSpec
from ..workload import build_workload, keys_by_emails, keys_sent_twice
from .burst_drain import drain_burst, queue_depth

SENT_RATE_AIM = 0.9  # of R, once the burst is under way
DRAIN_AIM = 1.15  # x the ideal drain time, keys / R (one email a key)
SQS_REQUESTS_AIM = 3.0  # the pipeline's SQS requests per email: receives, deletes, holds and copies
# What the pipeline asks of the job queue for a burst's work (the producer's enqueue and the harness's depth
# checks are not its; the pollers' empty receives are counted apart).
PIPELINE_SQS_OPERATIONS = frozenset({"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility",
                                     "ChangeMessageVisibilityBatch", "SendMessage"})


@dataclass
class BurstReport:
    rate: float
    jobs: int
    keys: int
    pollers: int
    emails_per_key: dict[int, int]
    keys_sent_twice: list[str]
    keys_lost: list[str]
    dead_letters: int
    drain_s: float
    sent_rate: float  # emails a second between the first and the last email SES accepted
    throttles: int
    invocations: int
    aws_calls: dict[str, int]  # by service, during the burst
    batch_size: int = 10  # the event source's
    sqs_requests: int = 0  # the job queue's and DLQ's (PIPELINE_SQS_OPERATIONS), less the pollers' empty receives
    empty_receives: int = 0  # receives that found nothing (a poller's idle cost, whatever is sent)
    other_sqs_requests: int = 0  # PIPELINE_SQS_OPERATIONS on other queues (a deployed stack's evidence queue)
    copies: int = 0  # delayed copies the consumer put on the job queue (jobs paced, throttled or in flight elsewhere)
    subjects: frozenset[str] = field(default=frozenset(), repr=False)  # the burst's emails, to tell them apart
    accepted_s: list[float] = field(default_factory=list, repr=False)  # when SES accepted each, since enqueued

    @property
    def ideal_drain_s(self) -> float:
        return self.keys / self.rate

    @property
    def first_accept_s(self) -> float:
        """From enqueueing (the instances' cold starts) to SES's first accept."""
        return self.accepted_s[0] if self.accepted_s else 0.0

    @property
    def drain_under_way_s(self) -> float:
        """From SES's first accept until the queue is empty: the drain the aim measures."""
        return self.drain_s - self.first_accept_s

    @property
    def drain_ratio(self) -> float:
        return self.drain_under_way_s / self.ideal_drain_s

    @property
    def last_email_ratio(self) -> float:
        """From SES's first accept to its last, over the ideal: the emails' drain, without the last invocations'
        hold-back (their messages are deleted when they end, up to a token's time after their sends)."""
        return (self.accepted_s[-1] - self.accepted_s[0]) / self.ideal_drain_s if self.accepted_s else 0.0

    @property
    def ok(self) -> bool:
        """Nothing dead-lettered, lost or sent twice: what a burst must never cost."""
        return not self.keys_sent_twice and not self.keys_lost and self.dead_letters == 0

    @property
    def sqs_per_email(self) -> float:
        return self.per_email(self.sqs_requests)

    @property
    def aims_met(self) -> bool:
        """Sending at the account's rate: at least 90% of R once under way, drained within 15% of keys / R, at most
        three SQS requests per email."""
        return (self.sent_rate >= SENT_RATE_AIM * self.rate and self.drain_ratio <= DRAIN_AIM
                and self.sqs_per_email <= SQS_REQUESTS_AIM)

    def missed_aims(self) -> list[str]:
        """Each aim missed, with its figure (empty when all are met)."""
        missed = []
        if self.drain_ratio > DRAIN_AIM:
            missed.append(f"burst drained in {self.drain_ratio:.2f}x the ideal (aim {DRAIN_AIM}x)")
        if self.sent_rate < SENT_RATE_AIM * self.rate:
            missed.append(f"burst at {self.sent_rate / self.rate:.0%} of SES's rate (aim {SENT_RATE_AIM:.0%})")
        if self.sqs_per_email > SQS_REQUESTS_AIM:
            missed.append(f"burst at {self.sqs_per_email:.2f} SQS requests per email (aim {SQS_REQUESTS_AIM:g})")
        return missed

    def per_email(self, count: float) -> float:
        return count / max(1, self.keys)

    def as_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "ideal_drain_s": self.ideal_drain_s, "ok": self.ok, "aims_met": self.aims_met}
        del data["subjects"]
        data["accepted_s"] = [round(at, 2) for at in self.accepted_s]
        return data

    def lines(self) -> list[str]:
        calls = ", ".join(f"{service} {self.per_email(n):.2f}" for service, n in sorted(self.aws_calls.items()))
        return [
            f"  burst: {self.jobs} jobs for {self.keys} keys against an SES that accepts {self.rate:g} emails/s, "
            f"{self.pollers} pollers",
            f"    emails per key: {self.emails_per_key}; sent twice {len(self.keys_sent_twice)}; lost "
            f"{len(self.keys_lost)}; in the DLQ {self.dead_letters}",
            f"    drained in {self.drain_under_way_s:.1f} s from SES's first accept (ideal {self.ideal_drain_s:.1f} s: "
            f"{self.drain_ratio:.2f}x, aim {DRAIN_AIM}x; the last email at {self.last_email_ratio:.2f}x; the "
            f"instances' cold starts before it {self.first_accept_s:.1f} s); sent {self.sent_rate:.2f} emails/s = "
            f"{self.sent_rate / self.rate:.0%} of R "
            f"(aim {SENT_RATE_AIM:.0%})",
            f"    per email: {self.per_email(self.throttles):.2f} throttles, "
            f"{self.per_email(self.invocations):.2f} invocations, AWS calls {calls}",
            f"    SQS requests per email on the job queue and its DLQ (receives, deletes, holds, copies): "
            f"{self.sqs_per_email:.2f} (aim at most {SQS_REQUESTS_AIM:g}); besides, "
            f"{self.per_email(self.empty_receives):.2f} empty receives"
            + (f" and {self.per_email(self.other_sqs_requests):.2f} on the stack's other queues (the recorder's "
               "evidence queue, its empty receives in)" if self.other_sqs_requests else ""),
        ]


def run_burst(
    function: FunctionSpec, source: EventSourceSpec, environment: dict[str, str], dead_letter_queue_url: str,
    sent_subjects: Callable[[], list[str]], rate: float, keys: int, seed: int, log: IO[str] | None = None,
    bound_s: float = 600,
) -> BurstReport:
    """Enqueue ``keys`` jobs at once (with the workload's duplicates and re-enqueues) while SES accepts ``rate``
    emails a second, and play the event source until the queue is empty."""
    workload = build_workload(keys, seed, first=500_000, poison=False)
    bodies = workload.first_wave + workload.reenqueued
    sqs = boto3.client("sqs")
    dead_before = queue_depth(sqs, dead_letter_queue_url)
    calls_before, queues_before = REQUESTS.snapshot(), REQUESTS.queue_snapshot()
    run = drain_burst(function, source, environment, sqs, bodies, rate, log, bound_s)
    calls: Counter[str] = Counter()
    for (service, _), count in (REQUESTS.snapshot() - calls_before).items():
        calls[service] += count
    own_queues = {queue_name(source.queue_url), queue_name(dead_letter_queue_url)}
    pipeline_sqs = other_sqs = copies = 0
    for (queue, operation), count in (REQUESTS.queue_snapshot() - queues_before).items():
        if operation in PIPELINE_SQS_OPERATIONS:
            pipeline_sqs += count if queue in own_queues else 0
            other_sqs += 0 if queue in own_queues else count
        if operation == "SendMessage" and queue == queue_name(source.queue_url):  # the jobs came in batches
            copies += count
    empty_receives = run.runner["empty_receives"]
    per_key = workload.emails_per_key(sent_subjects())
    return BurstReport(
        rate=rate, jobs=len(bodies), keys=len(per_key), pollers=source.max_concurrency,
        emails_per_key=keys_by_emails(per_key),
        keys_sent_twice=keys_sent_twice(per_key),
        keys_lost=sorted(k for k, n in per_key.items() if n == 0),
        dead_letters=queue_depth(sqs, dead_letter_queue_url) - dead_before, drain_s=run.drain_s,
        sent_rate=(len(run.accepted_at) - 1) / run.span_s if run.span_s else 0.0, throttles=run.throttles,
        invocations=run.runner["invocations"], aws_calls=dict(calls), sqs_requests=pipeline_sqs - empty_receives,
        empty_receives=empty_receives, other_sqs_requests=other_sqs, copies=copies, batch_size=source.batch_size,
        subjects=frozenset(workload.subject_to_key),
        accepted_s=[at - run.started for at in run.accepted_at],
    )

