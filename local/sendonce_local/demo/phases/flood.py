"""The flood: one tenant's bulk jobs at 40 x SES's rate through the deployed example app's two lanes, while urgent
jobs and a second tenant's arrive; each one's time to SES against its time alone (``demo.scenarios.flood``)."""

from __future__ import annotations

from typing import Any

from ..phase import PhaseContext
from ..scenarios.flood import FLOOD_FACTOR, SUBJECT_PREFIX, FloodPlan, FloodReport, Lanes, run_flood
from ..steps import step


def is_phase_email(sent: Any) -> bool:
    return str(getattr(sent, "subject", "")).startswith(SUBJECT_PREFIX)


def two_lanes(context: PhaseContext, phase: str) -> Lanes | None:
    """The deployed app's two lanes and its first two SES tenants; None, said, when it has not both."""
    deployed = context.deployed
    if deployed.urgent_consumer is None or len(deployed.ses_tenants) < 2:
        context.say(f"{phase}: not in this run ({deployed.consumer.function.name} needs urgent_lane and two SES "
                    "tenants, add_ses_tenant)")
        return None
    return Lanes(deployed.consumer, deployed.urgent_consumer, *deployed.ses_tenants[:2])


def flood_phase(context: PhaseContext) -> FloodReport | None:
    options, aws, log, say = context.options, context.aws, context.log, context.say
    label = step(9)
    if options.flood_s <= 0 or options.flood_arrivals <= 0:
        say(f"{label} the flood: not in this run")
        return None
    lanes = two_lanes(context, f"{label} the flood")
    if lanes is None:
        return None
    plan = FloodPlan(options.flood_s, options.flood_arrivals, options.flood_gap_s)
    rate = options.burst_rate
    say(f"{label} the flood: tenant {lanes.flood_tenant}'s {plan.flood_jobs(rate)} bulk jobs at {FLOOD_FACTOR} x "
        f"SES's {rate:g} emails/s while {plan.arrivals} urgent jobs ({lanes.urgent.function.name}) and "
        f"{plan.arrivals} of tenant {lanes.quiet_tenant}'s arrive, one of each in every {plan.gap_s:g} s; the same "
        "arrivals alone first; times to SES from the emulator's log of sends")
    report = run_flood(lanes, aws.environment, aws.ses_sends, rate, plan, options.seed + 5, log, options.bound())
    for line in report.lines():
        say(f"    {line.strip()}")
    return report
