"""What a run measures and how often (the full plan, and the quick one that checks the suite works), and the
median-with-spread every figure is shown as."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
DELAYS_MS = {"dynamodb": 5.0, "sesv2": 60.0, "sqs": 5.0, "other": 5.0}  # one round trip each, in region


@dataclass(frozen=True)
class Plan:
    records: int
    repeats: int
    workers: tuple[int, ...]
    import_runs: int
    synth_runs: int
    latency_batches: int
    evidence_emails: int
    burst_factor: int  # the burst is this many times SES's rate
    privacy_emails: int = 20_000
    outcome_emails: int = 500
    scheduled_hours: tuple[int, ...] = (1, 24, 168)  # an hour, a day, a week ahead
    outbox_jobs: int = 3_000  # the backlog one relay drains, per run
    outbox_latency_jobs: int = 100  # committed one at a time, with NOTIFY and with polling only (about 1 s each)
    outbox_transactions: int = 1_000  # application transactions per run, half with `add`
    pacing_factor: int = 50  # the pacing section's bursts are this many times SES's rate (the independent load run's)
    pacing_repeats: int = 2
    pacing_timeouts_s: tuple[int, ...] = (3, 5, 30)
    pacing_pollers: tuple[int, ...] = (2, 5, 20)
    ceiling_factor: int = 50  # the SES-rate section's bursts are this many times SES's rate
    ceiling_repeats: int = 2
    ceiling_timeouts_s: tuple[int, ...] = (3, 5)  # the independent load run's
    flood_s: float = 1.5  # the flood section's bulk jobs arrive at 40 x SES's rate for this long
    flood_arrivals: int = 24  # urgent jobs, and as many of the quiet tenant's, per run (a p95 of 24 is not the slowest)
    flood_gap_s: float = 2.0  # an urgent job and a quiet tenant's in each, at random times in its halves
    flood_repeats: int = 2
    flood_timeouts_s: tuple[int, ...] = (30, 5)  # the construct's default, and the demo's
    fault_factor: int = 8  # each fault burst is this many times SES's rate, through a stretch of trouble
    fault_repeats: int = 3
    stop_jobs: int = 40  # jobs parked while SES's account is paused, each delivered four times
    attachment_emails: int = 50  # per run: plain jobs, and as many with a 100 KB file inline
    attachment_s3_emails: int = 10  # per run: jobs with a 5 MB file through the attachments bucket
    guard_emails: int = 100  # per run and kind: first sends with the mis-keyed-producer guard off, on, and suspects


QUICK = Plan(records=60, repeats=2, workers=(1, 4), import_runs=5, synth_runs=1, latency_batches=3,
             evidence_emails=20, burst_factor=10, privacy_emails=2_000, outcome_emails=50, scheduled_hours=(2,),
             outbox_jobs=300, outbox_latency_jobs=3, outbox_transactions=100, pacing_factor=2, pacing_repeats=1,
             pacing_timeouts_s=(5,), pacing_pollers=(2,), ceiling_factor=2, ceiling_repeats=1,
             ceiling_timeouts_s=(5,), flood_s=0.2, flood_arrivals=2, flood_gap_s=1.0,
             flood_repeats=1, flood_timeouts_s=(5,), fault_factor=2, fault_repeats=1, stop_jobs=10,
             attachment_emails=10, attachment_s3_emails=2, guard_emails=10)
FULL = Plan(records=400, repeats=5, workers=(1, 2, 4, 8), import_runs=21, synth_runs=3, latency_batches=20,
            evidence_emails=200, burst_factor=50)


class Spread:
    def __init__(self, values: list[float]) -> None:
        self.values = values
        self.median = statistics.median(values)

    def show(self, digits: int = 1) -> str:
        if len(self.values) == 1:
            return f"{self.median:.{digits}f}"
        return f"{self.median:.{digits}f} ({min(self.values):.{digits}f} to {max(self.values):.{digits}f})"
