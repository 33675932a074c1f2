"""`sendonce latency`: how long SES's events take to reach the ledger in your account, measured, so that
``evidence_grace_period`` can be chosen from data.

It enqueues probe jobs to SES's mailbox simulator (success@simulator.amazonses.com, which works in the SES sandbox)
through the deployed pipeline, as a producer would, and reads each probe's record: from SES accepting the email
(``sesAcceptedAt``, the event's own ``mail.timestamp``) to the recorder writing its first event (``evidenceAt``).
That is the wait a dead worker's send needs before its key can be decided.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sendonce_contract.message import parse_job
from sendonce_contract.schema import DEDUPE_KEY, DEFAULT_EVIDENCE_GRACE_S, Ledger

SIMULATOR_SUCCESS = "success@simulator.amazonses.com"
PROBE_PREFIX = "sendonce-latency"
POLL_INTERVAL_S = 2.0
SQS_BATCH = 10
DYNAMODB_BATCH_GET = 100


@dataclass(frozen=True)
class LatencyReport:
    probes: int
    measured_s: tuple[float, ...]  # per probe whose first event was recorded, sorted
    missing: tuple[str, ...]  # keys with no event by the timeout

    @property
    def p50_s(self) -> float | None:
        return percentile(self.measured_s, 50)

    @property
    def p99_s(self) -> float | None:
        return percentile(self.measured_s, 99)

    def as_dict(self) -> dict[str, Any]:
        return {"probes": self.probes, "measured": len(self.measured_s), "missing": list(self.missing),
                "p50_s": self.p50_s, "p99_s": self.p99_s,
                "max_s": self.measured_s[-1] if self.measured_s else None}


def percentile(sorted_values: Sequence[float], p: float) -> float | None:
    """The nearest-rank percentile of already sorted values (None for none)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def probe_jobs(sender: str, count: int, run: str | None = None) -> list[tuple[str, str]]:
    """``count`` (key, body) probe jobs from ``sender``, checked by the consumer's own parser."""
    run = run or uuid.uuid4().hex[:12]
    jobs = []
    for n in range(count):
        key = f"{PROBE_PREFIX}:{run}:{n}"
        body = json.dumps({DEDUPE_KEY: key, "from": sender, "to": [SIMULATOR_SUCCESS],
                           "subject": f"sendonce latency probe {n + 1} of {count}",
                           "text": "A probe of sendonce latency: SES's mailbox simulator receives it."})
        parse_job(body, sqs_message_id="")
        jobs.append((key, body))
    return jobs


class LatencyProbe:
    def __init__(self, sqs: Any, dynamodb: Any, queue_url: str, table: str,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sqs = sqs
        self._dynamodb = dynamodb
        self._queue_url = queue_url
        self._table = table
        self._clock = clock
        self._sleep = sleep

    def measure(self, sender: str, count: int, timeout_s: float) -> LatencyReport:
        jobs = probe_jobs(sender, count)
        for start in range(0, len(jobs), SQS_BATCH):
            entries = [{"Id": str(n), "MessageBody": body} for n, (_, body) in enumerate(jobs[start:start + SQS_BATCH])]
            failed = self._sqs.send_message_batch(QueueUrl=self._queue_url, Entries=entries).get("Failed", [])
            if failed:
                raise ValueError(f"the job queue refused {len(failed)} probes: {failed[0].get('Message', failed[0])}")
        waiting = {key for key, _ in jobs}
        measured: dict[str, float] = {}
        deadline = self._clock() + timeout_s
        while waiting:
            for key, item in self._read(sorted(waiting)).items():
                accepted, recorded = item.get(Ledger.SES_ACCEPTED_AT), item.get(Ledger.EVIDENCE_AT)
                if accepted and recorded:
                    measured[key] = (int(recorded["N"]) - int(accepted["N"])) / 1000
                    waiting.discard(key)
            if not waiting or self._clock() >= deadline:
                break
            self._sleep(min(POLL_INTERVAL_S, max(0.0, deadline - self._clock())))
        return LatencyReport(count, tuple(sorted(measured.values())), tuple(sorted(waiting)))

    def _read(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        items: dict[str, dict[str, Any]] = {}
        for start in range(0, len(keys), DYNAMODB_BATCH_GET):
            request = {self._table: {"Keys": [{Ledger.KEY: {"S": k}} for k in keys[start:start + DYNAMODB_BATCH_GET]],
                                     "ConsistentRead": True}}
            while request:
                response = self._dynamodb.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(self._table, []):
                    items[item[Ledger.KEY]["S"]] = item
                request = response.get("UnprocessedKeys") or {}
        return items


def describe(report: LatencyReport, grace_s: int | None = None) -> str:
    """The report for a person, with what it means for ``evidence_grace_period``: the pipeline's (``grace_s``,
    from its stack), or the default when it is not known."""
    if not report.measured_s:
        return (f"no SES event reached the ledger for any of {report.probes} probes: check that the pipeline was "
                "deployed with ses_events=True and that its consumer is running (sendonce dlq list)")
    lines = [f"{len(report.measured_s)} of {report.probes} probes: from SES accepting the email to its first event "
             f"on the ledger, p50 {report.p50_s:.1f} s, p99 {report.p99_s:.1f} s, max {report.measured_s[-1]:.1f} s"]
    if report.missing:
        lines.append(f"{len(report.missing)} probes had no event by the timeout (e.g. {report.missing[0]}): an "
                     "event later than the grace period is how a resend can double")
    grace = (f"this pipeline's evidence_grace_period ({grace_s} s)" if grace_s is not None else
             f"evidence_grace_period (the default {DEFAULT_EVIDENCE_GRACE_S} s; pass --stack to weigh yours)")
    lines.append(f"{grace} should stay well above the p99 and the max: "
                 f"{(grace_s or DEFAULT_EVIDENCE_GRACE_S) / max(report.measured_s[-1], 0.001):.0f}x the max here")
    return "\n".join(lines)
