"""SES stops sending: one tenant's sending disabled during a flood of its jobs, then the account's paused, through the
deployed example app's two lanes; every key once, none in a DLQ, and the other tenant's waits as alone
(``demo.scenarios.ses_stops``)."""

from __future__ import annotations

from typing import Any

from ..phase import PhaseContext
from ..scenarios.ses_stops import StopsPlan, run_ses_stops
from ..scenarios.ses_stops_report import SUBJECT_PREFIX, SesStopsReport
from ..steps import step
from .flood import two_lanes


def is_phase_email(sent: Any) -> bool:
    return str(getattr(sent, "subject", "")).startswith(SUBJECT_PREFIX)


def ses_stops_phase(context: PhaseContext) -> SesStopsReport | None:
    options, aws, say = context.options, context.aws, context.say
    label = step(10)
    if options.stops_pause_s <= 0:
        say(f"{label} SES stops: not in this run (the full demo and make test run it)")
        return None
    lanes = two_lanes(context, f"{label} SES stops")
    if lanes is None:
        return None
    plan = StopsPlan(options.stops_pause_s, options.stops_flood_s, options.stops_arrivals)
    say(f"{label} SES stops: tenant {lanes.flood_tenant}'s sending disabled for {plan.pause_s:g} s (the emulator's "
        f"SES reputation control, as SES's findings disable a tenant) while its {plan.flood_jobs(options.burst_rate)} "
        f"bulk jobs flood in and {plan.arrivals} of tenant {lanes.quiet_tenant}'s arrive (the same arrivals alone "
        f"first); then the account's sending paused for {plan.pause_s:g} s (PutAccountSendingAttributes) while "
        f"urgent jobs and more of {lanes.quiet_tenant}'s arrive. Parked jobs wait in the waiting room; the schedule "
        "watch, every minute, sends each stop's backlog back once SES says it sends again")
    report = run_ses_stops(lanes, aws, options.burst_rate, plan, options.seed + 6, context.log, options.bound())
    for line in report.lines():
        say(f"    {line.strip()}")
    return report
