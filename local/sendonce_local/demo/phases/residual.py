"""The residual: keys sent while SES's events for some emails come late or never, the case the evidence cannot
settle, shown and detected."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from ...emulator.server import LocalAws
from ...emulator.ses_publisher import EventFaults, SesEventPublisher
from ...lambda_service.sqs_source import EventSourceRunner, FaultPlan
from ..example_app import Deployed
from ..options import DemoOptions
from ..report import Residual
from ..steps import step
from ..workload import build_workload
from .traffic import run_phase

RESIDUAL_FORCED_CRASHES = 4  # with 3 in 4 Send events lost, no double in 4 crashes is 1 run in 256
RESIDUAL_FAULT_SHARE = 0.2  # of the invocations after the forced ones, at least (the quick run: none)
# Keys enough for the forced kills to fire in the phase's first round of invocations: some invocations send nothing
# (a duplicate, a paced batch), and with 8 keys the kills left over waited for redeliveries 30 s later.
RESIDUAL_MIN_KEYS = 16


def residual_phase(
    options: DemoOptions, aws: LocalAws, deployed: Deployed, publisher: SesEventPublisher,
    recorder_runner: EventSourceRunner, log: IO[str], say: Callable[[str], None],
) -> Residual | None:
    """Keys sent while SES's events for some emails come late or never: what the evidence cannot settle."""
    keys = options.residual_keys if options.residual_keys is not None else max(RESIDUAL_MIN_KEYS, options.keys // 5)
    if keys <= 0:
        return None
    grace_s = options.evidence_grace_s
    # Late past the decision: the redelivery (6 x the function timeout) plus the grace period, and then some.
    late_s = 8 * options.function_timeout_s + grace_s
    publisher.faults = EventFaults(delay_s=0.2, outcome_delay_s=late_s, drop_send=options.residual_send_events_dropped)
    dropped_before = len(publisher.stats.send_events_dropped)
    say(f"{step(6)} the residual: {keys} more keys while {options.residual_send_events_dropped:.0%} of SES's Send "
        f"events are lost and the rest of each email's events come after the {grace_s} s grace period; workers killed "
        "right after SES accepted")
    workload = build_workload(keys, options.seed + 1, first=100_000, poison=False)
    # The first invocations are always killed right after SES accepted, so detection is exercised every run. The
    # quick run kills those only (phase_fault_probability 0): each kill after them made a job wait out its 30 s
    # visibility timeout again, and the quick run took 319 s, over its 5 minutes.
    chance = max(RESIDUAL_FAULT_SHARE, options.fault_probability) if options.phase_fault_probability else 0.0
    faults = FaultPlan(chance, options.seed + 1, ("after_send", "lost_answer"), forced=RESIDUAL_FORCED_CRASHES)
    run_phase(options, aws, deployed, workload, faults, publisher, recorder_runner, log, say, with_orders=False,
              label="     ")
    return Residual(workload=workload, send_events_dropped=set(publisher.stats.send_events_dropped[dropped_before:]))

