"""What the example app heard: the outcome events its on_outcome rule routed to its queue, against the ledger."""

from __future__ import annotations

import time

from ..outcome_check import OutcomeEventsCheck, check_outcome_events
from ..phase import PhaseContext


def outcome_events_phase(context: PhaseContext) -> OutcomeEventsCheck | None:
    """Let the publisher (one of the standing runners) catch up with the ledger's stream, then read what the
    example app's queue heard. Last of the phases: it stops the publisher."""
    deployed, runners, say = context.deployed, context.standing.relays, context.say
    queue_url = deployed.app_queue_url
    if not runners or queue_url is None:
        return None
    settle_by, quiet = time.monotonic() + 60, 0
    while time.monotonic() < settle_by and quiet < 2:  # idle on two polls in a row: the last writes were read
        quiet = quiet + 1 if all(r.idle() for r in runners) else 0
        time.sleep(0.5)
    for runner in runners:
        runner.stop()
    check = check_outcome_events(queue_url, deployed.table)
    say(f"      the outcome publisher put each key's transitions on the default bus; the example app's rule "
        f"(on_outcome: bounced, complained) routed them to its queue: {check.line()}")
    return check

