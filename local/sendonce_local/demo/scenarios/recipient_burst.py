"""A burst of multi-recipient jobs against an SES that limits recipients a second, as SES's quotas do: the
consumer paces in recipients (one token each), so it sends at SES's rate counted in recipients and SES
throttles nothing. Counted outside the consumer: emails and recipients SES accepted, throttles, the DLQ.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import IO, Any

import boto3

from ...lambda_service.instances import FunctionSpec
from ...lambda_service.sqs_source import EventSourceSpec
from ..workload import build_workload, keys_by_emails
from .burst_drain import drain_burst

SENT_RATE_AIM = 0.9  # of R, in recipients a second, once the burst is under way


@dataclass
class RecipientBurstReport:
    rate: float  # recipients a second SES accepts
    recipients_per_job: int
    jobs: int
    keys: int
    emails_per_key: dict[int, int]
    dead_letters: int
    drain_s: float
    recipients_per_s: float  # recipients SES accepted a second, between the first and the last email
    throttles: int

    @property
    def ok(self) -> bool:
        return self.emails_per_key == {1: self.keys} and self.dead_letters == 0

    @property
    def aims_met(self) -> bool:
        return self.recipients_per_s >= SENT_RATE_AIM * self.rate and self.throttles == 0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "aims_met": self.aims_met}

    def lines(self) -> list[str]:
        return [
            f"  {self.jobs} jobs for {self.keys} keys, {self.recipients_per_job} recipients each (to, cc, bcc), "
            f"against an SES that accepts {self.rate:g} recipients/s",
            f"    emails per key: {self.emails_per_key}; in the DLQ {self.dead_letters}; SES throttles "
            f"{self.throttles}",
            f"    sent {self.recipients_per_s:.2f} recipients/s = {self.recipients_per_s / self.rate:.0%} of R (aim "
            f"{SENT_RATE_AIM:.0%}, zero throttles); drained in {self.drain_s:.1f} s (ideal "
            f"{self.keys * self.recipients_per_job / self.rate:.1f} s)",
        ]


def with_recipients(body: str, recipients: int) -> str:
    """The job with ``recipients`` in all: its own addressee, then cc and bcc of the same domain."""
    job = json.loads(body)
    to = job["to"][0] if isinstance(job["to"], list) else job["to"]
    local, _, domain = to.partition("@")
    extra = [f"{local}+{n}@{domain}" for n in range(1, recipients)]
    job["to"] = [to, *extra[:1]]
    job["cc"] = extra[1:3]
    job["bcc"] = extra[3:]
    return json.dumps({k: v for k, v in job.items() if v != []})


def run_recipient_burst(
    function: FunctionSpec, source: EventSourceSpec, environment: dict[str, str], dead_letter_queue_url: str,
    sent_subjects: Any, rate: float, keys: int, recipients: int, seed: int, log: IO[str] | None = None,
    bound_s: float = 600,
) -> RecipientBurstReport:
    workload = build_workload(keys, seed, first=800_000, poison=False)
    bodies = [with_recipients(body, recipients) for body in workload.first_wave + workload.reenqueued]
    sqs = boto3.client("sqs")
    run = drain_burst(function, source, environment, sqs, bodies, rate, log, bound_s)
    per_key = workload.emails_per_key(sent_subjects())
    dead = sqs.get_queue_attributes(QueueUrl=dead_letter_queue_url,
                                    AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    counts = run.recipients
    return RecipientBurstReport(
        rate=rate, recipients_per_job=recipients, jobs=len(bodies), keys=len(per_key),
        emails_per_key=keys_by_emails(per_key),
        dead_letters=int(dead["ApproximateNumberOfMessages"]), drain_s=run.drain_s,
        # the first email's recipients were sent at the start of the span, so they do not count toward its rate
        recipients_per_s=(sum(counts) - counts[0]) / run.span_s if run.span_s else 0.0, throttles=run.throttles,
    )
