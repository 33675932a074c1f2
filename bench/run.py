"""`make bench`: what exactly-once costs, measured side by side against the usual alternatives.

Writes BENCHMARKS.md: the machine, the versions, the commands, and every figure as a median over repeated runs with
its spread (min to max). Ratios come from the same run, because this machine's absolute speed drifts. The emulator
runs in its own process, so the consumers' CPU time is theirs alone.

This module is the entry: it runs the scenarios (bench/scenarios/, one module per section) in order and hands their
figures to the one renderer (bench/render.py); plan.py says how much each measures, prices.py what AWS charges.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# The bench's own modules, and the test support (testing/sendonce_testing), which no wheel ships.
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "testing")]

import render  # noqa: E402
from emulator_process import create_resources, start_emulator  # noqa: E402
from plan import DELAYS_MS, FULL, QUICK, ROOT, Plan, Spread  # noqa: E402
from render import (  # noqa: E402
    FLOOD_SECTION,
    KEY_PRIVACY_SECTION,
    PACING_SECTION,
    render_burst,
    render_evidence,
    render_flood,
    render_floor,
    render_key_privacy,
    render_latency,
    render_pacing,
    render_recipient_burst,
    write_section,
)
from scenarios import attachments, lifecycle  # noqa: E402
from scenarios.bursts import (  # noqa: E402
    burst_scenario,
    fault_burst_scenario,
    pacing_scenario,
    recipient_burst_scenario,
    ses_rate_ceiling_scenario,
)
from scenarios.calls import count_calls  # noqa: E402
from scenarios.cold_start import asset_sizes, cold_starts, synth_seconds  # noqa: E402
from scenarios.evidence import evidence_costs  # noqa: E402
from scenarios.flood import flood_scenario  # noqa: E402
from scenarios.floor import floor_run  # noqa: E402
from scenarios.key_privacy import key_privacy_costs  # noqa: E402
from scenarios.latency import latency_run  # noqa: E402
from scenarios.mis_keyed_guard import guard_costs  # noqa: E402
from scenarios.ses_stops import ses_stop_costs  # noqa: E402
from scenarios.sql_outbox import sql_outbox_costs  # noqa: E402
from scenarios.table_cost import sent_item  # noqa: E402
from scenarios.throughput import throughput  # noqa: E402

SECTIONS = {
    "cold-start": (render.COLD_START_SECTION, lambda plan: render.render_cold_start(cold_starts(plan.import_runs))),
    "asset": (render.ASSET_SECTION, lambda plan: render.render_asset(asset_sizes())),
    "key-privacy": (KEY_PRIVACY_SECTION, lambda plan: render_key_privacy(
        key_privacy_costs(plan.privacy_emails, plan.repeats))),
    "outcome-events": (render.OUTCOME_SECTION, lambda plan: render.render_outcome_events(
        lifecycle.outcome_event_costs(plan.outcome_emails))),
    "scheduled": (render.SCHEDULED_SECTION, lambda plan: render.render_scheduled(
        lifecycle.scheduled_costs(plan.scheduled_hours))),
    "floor": ("## 10. The consumer's own floor", lambda plan: render_floor(
        floor_run(plan.latency_batches, DELAYS_MS), DELAYS_MS, plan.latency_batches)),
    "burst": ("## 9. A burst of", lambda plan: render_burst(burst_scenario(plan.burst_factor), plan.burst_factor)),
    "recipient-burst": ("## 9b. A burst of", lambda plan: render_recipient_burst(
        recipient_burst_scenario(plan.burst_factor), plan.burst_factor)),
    "pacing": (PACING_SECTION, lambda plan: render_pacing(pacing_scenario(
        plan.pacing_factor, plan.pacing_repeats, plan.pacing_timeouts_s, plan.pacing_pollers), plan.pacing_factor)),
    "ses-rate": (render.CEILING_SECTION, lambda plan: render.render_ses_rate_ceiling(ses_rate_ceiling_scenario(
        plan.ceiling_factor, plan.ceiling_repeats, plan.ceiling_timeouts_s), plan.ceiling_factor)),
    "flood": (FLOOD_SECTION, lambda plan: render_flood(flood_scenario(
        plan.flood_timeouts_s, plan.flood_s, plan.flood_arrivals, plan.flood_gap_s, plan.flood_repeats))),
    "fault-burst": (render.FAULT_BURST_SECTION, lambda plan: render.render_fault_burst(
        fault_burst_scenario(plan.fault_factor, plan.fault_repeats), plan.fault_factor)),
    "ses-stops": (render.SES_STOPS_SECTION, lambda plan: render.render_ses_stops(
        ses_stop_costs(plan.stop_jobs))),
    "attachments": (render.ATTACHMENTS_SECTION, lambda plan: render.render_attachments(
        attachments.attachment_costs(plan.attachment_emails, plan.attachment_s3_emails, plan.repeats),
        *attachments.default_pipeline())),
    "guard": (render.GUARD_SECTION, lambda plan: render.render_guard(guard_costs(plan.guard_emails, plan.repeats))),
    "sql-outbox": (render.SQL_OUTBOX_SECTION, lambda plan: render.render_sql_outbox(sql_outbox_costs(
        plan.outbox_jobs, plan.outbox_latency_jobs, plan.outbox_transactions, plan.repeats, DELAYS_MS))),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a small run, to check the suite works")
    parser.add_argument("--out", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--dynamodb-ms", type=float, default=DELAYS_MS["dynamodb"], help="DynamoDB round trip")
    parser.add_argument("--ses-ms", type=float, default=DELAYS_MS["sesv2"], help="SES round trip")
    parser.add_argument("--sqs-ms", type=float, default=DELAYS_MS["sqs"], help="SQS round trip")
    parser.add_argument("--only", choices=sorted(SECTIONS), help="run one section (those that need an emulator "
                        "start their own), and replace just that section of the report")
    args = parser.parse_args()
    DELAYS_MS.update(dynamodb=args.dynamodb_ms, sesv2=args.ses_ms, sqs=args.sqs_ms)
    plan = QUICK if args.quick else FULL
    if args.only:
        heading, section = SECTIONS[args.only]
        text = section(plan)
        write_section(args.out, heading, text)
        print(text)
        return
    emulator = start_emulator()
    try:
        report = run(plan, " ".join(["make bench", *(["ARGS=--quick"] if args.quick else [])]))
    finally:
        emulator.terminate()
        emulator.wait()
    args.out.write_text(report)
    print(report)


def run(plan: Plan, command: str) -> str:
    names = create_resources()
    print("calls per record...", file=sys.stderr)
    calls = {kind: count_calls(kind, names) for kind in ("sendonce", "powertools", "baseline")}
    print("throughput...", file=sys.stderr)
    kinds = ("sendonce", "powertools", "baseline")
    rates: dict[tuple[str, int], Spread] = {}
    cpus: dict[tuple[str, int], Spread] = {}
    ratios: dict[tuple[str, int], Spread] = {}
    for workers in plan.workers:
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in kinds}
        for _ in range(plan.repeats):
            for kind in kinds:  # interleaved, so drift hits all three alike
                samples[kind].append(throughput(kind, names, plan.records, workers))
        for kind in kinds:
            rates[kind, workers] = Spread([s[0] for s in samples[kind]])
            cpus[kind, workers] = Spread([s[1] for s in samples[kind]])
        for other in ("powertools", "baseline"):
            ratios[other, workers] = Spread([a[0] / b[0] for a, b in zip(samples["sendonce"], samples[other],
                                                                          strict=True)])
    print("cold start...", file=sys.stderr)
    imports = cold_starts(plan.import_runs)
    assets = asset_sizes()
    print("synth...", file=sys.stderr)
    synth = {f: Spread([synth_seconds(f) for _ in range(plan.synth_runs)]) for f in ("sendonce", "raw")}
    item = sent_item(names)
    print("latency...", file=sys.stderr)
    latency = latency_run(names, plan.latency_batches, DELAYS_MS)
    print("SES evidence...", file=sys.stderr)
    evidence = evidence_costs(names, plan.evidence_emails)
    print("floor against a stub endpoint...", file=sys.stderr)
    floor = floor_run(plan.latency_batches, DELAYS_MS)
    print("burst...", file=sys.stderr)
    burst = SECTIONS["burst"][1](plan)
    print("burst in recipients...", file=sys.stderr)
    recipients = recipient_burst_scenario(plan.burst_factor)
    print("burst at function timeouts...", file=sys.stderr)
    pacing = SECTIONS["pacing"][1](plan)
    print("a burst with send_rate above SES's rate...", file=sys.stderr)
    pacing += SECTIONS["ses-rate"][1](plan)
    print("urgent and quiet-tenant jobs through a flood...", file=sys.stderr)
    flood = SECTIONS["flood"][1](plan)
    print("bursts through slow and throttled answers...", file=sys.stderr)
    faults = SECTIONS["fault-burst"][1](plan)
    print("a paused account's parked jobs...", file=sys.stderr)
    faults += SECTIONS["ses-stops"][1](plan)
    print("key privacy...", file=sys.stderr)
    privacy = render_key_privacy(key_privacy_costs(plan.privacy_emails, plan.repeats))
    print("outcome events and scheduled emails...", file=sys.stderr)
    lifecycle_sections = "".join(SECTIONS[name][1](plan) for name in ("outcome-events", "scheduled"))
    print("SQL outbox...", file=sys.stderr)
    sql_outbox = SECTIONS["sql-outbox"][1](plan)
    print("attachments...", file=sys.stderr)
    attached = SECTIONS["attachments"][1](plan)
    print("the mis-keyed-producer guard...", file=sys.stderr)
    guard = SECTIONS["guard"][1](plan)
    return (render.render_opening(plan, command, calls, rates, cpus, ratios, imports, assets, synth, item)
            + render_latency(plan, latency, DELAYS_MS) + render_evidence(evidence)
            + burst + render_recipient_burst(recipients, plan.burst_factor) + pacing
            + flood + faults + render_floor(floor, DELAYS_MS, plan.latency_batches) + privacy + lifecycle_sections
            + sql_outbox + attached + guard)


if __name__ == "__main__":
    main()
