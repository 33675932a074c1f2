"""How the demo runs: its workload's size, its faults, its short timeouts, and the time it may take."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .example_app import EXAMPLE_STACK


@dataclass(frozen=True)
class DemoOptions:
    project_dir: Path = Path()
    out_dir: Path = Path(".demo-out")
    stack: str = EXAMPLE_STACK
    keys: int = 250
    orders: int = 10  # orders written with their receipt in one transaction, through the outbox
    fault_probability: float = 0.1
    seed: int = 42
    # Short, so redeliveries come back within seconds (visibility is 6x this); the guarantees do not depend on it.
    # 3 s left a loaded 2-core machine's invocations at their deadline (copies and timeouts feeding each other).
    function_timeout_s: int = 5
    # Short for the same reason: the local publisher delivers SES's events within a second.
    evidence_grace_s: int = 10
    # The second phase: keys sent while a share of SES's Send events is lost, the residual shown and detected.
    residual_keys: int | None = None  # default: a fifth of keys, at least phases.residual.RESIDUAL_MIN_KEYS
    residual_send_events_dropped: float = 0.75
    # The burst: SES accepts this many emails a second (the example's send_rate), and the burst is 15 times that
    # (10 times for a small run).
    burst_rate: float = 5.0
    burst_keys: int | None = None
    # Bursts through a stretch of DynamoDB and SQS trouble (slow answers, throttling): keys in each, and how long.
    fault_burst_keys: int = 20
    fault_stretch_s: float = 6
    # The flood: one tenant's bulk jobs at 40 x SES's rate for this long, while this many urgent jobs and as many
    # of a quiet tenant's arrive, one of each in every flood_gap_s at random times (and the same arrivals alone,
    # first). 0: no flood.
    flood_s: float = 1.5
    flood_arrivals: int = 20  # a p95 of 20 is the second slowest (of 12 it was the slowest, one stray wait)
    flood_gap_s: float = 2.0
    # SES stops: one tenant's sending disabled for stops_pause_s while its bulk jobs flood in for stops_flood_s
    # (at 40 x SES's rate) and stops_arrivals of a quiet tenant's arrive; then the account's paused as long while
    # as many urgent jobs and quiet-tenant jobs arrive. 0: not in this run (the quick run).
    stops_pause_s: float = 60.0
    stops_flood_s: float = 1.5
    stops_arrivals: int = 20
    # The SQL outbox and attachments phases kill their first two invocations that send, and this share of the
    # rest; each killed job waits out its 30 s visibility timeout, once more each time it is killed again. At 0
    # (the quick run) the residual phase, too, kills its forced invocations only.
    phase_fault_probability: float = 0.3
    bound_s: float = 900  # the most any one phase may take
    budget_s: float = 840  # the most all phases together may take (deploying comes before): the demo is bounded
    deadline: float | None = None  # monotonic seconds: set from budget_s once deployed

    def bound(self) -> float:
        """How long the next phase may take: what is left of the budget, at most bound_s."""
        if self.deadline is None:
            return self.bound_s
        return max(5.0, min(self.bound_s, self.deadline - time.monotonic()))
