"""The main job, locally: deploy the example app to the embedded emulator with the real CDK CLI, send it real
traffic through the deployed consumer with workers killed on purpose, and report what SES accepted."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import boto3

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.stack_names import ChildId
from sendonce_runtime.entry_points import HANDLER, OUTCOME_HANDLER, RECORDER_HANDLER

from .cdk_cli import bootstrap_and_deploy
from .emulator import LocalAws, local_aws
from .emulator_gaps import apply_ttl, make_skipped_configuration_sets
from .event_source_runner import EventSourceRunner, FaultPlan
from .fault_burst import FaultBurstReport, dynamodb_throttling, late_answers, run_fault_burst
from .lambda_worker import FAULT_KINDS
from .load import BurstReport, run_burst
from .machine import machine_too_slow
from .outcome_check import OutcomeEventsCheck, app_queue_url, check_outcome_events
from .report import Report, Residual, build_report, render_text, write_outputs
from .ses_publisher import EventFaults, SesEventPublisher, put_on_default_bus
from .sql_outbox_phase import is_phase_email, run_sql_outbox_phase
from .stack_reader import (
    DeployedConsumer,
    DeployedStreamFunction,
    physical_id_of,
    read_consumers,
    read_stream_functions,
)
from .stream_runner import StreamEventSourceRunner
from .workload import SENDER, Workload, build_workload, enqueue

SENDER_IDENTITY = "example.com"
RESIDUAL_FORCED_CRASHES = 4  # with 3 in 4 Send events lost, no double in 4 crashes is 1 run in 256
# SES's events as the demo plays them outside the residual phase: late, duplicated and reordered, none lost.
DELIVERED_FAULTS = EventFaults(delay_s=0.2, outcome_delay_s=0.5, duplicate=0.1, reorder=True)


@dataclass(frozen=True)
class DemoOptions:
    project_dir: Path = Path()
    out_dir: Path = Path(".demo-out")
    stack: str = "SendOnceExample"
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
    residual_keys: int | None = None  # default: a fifth of keys, at least 8
    residual_send_events_dropped: float = 0.75
    # The burst: SES accepts this many emails a second (the example's send_rate), and the burst is 15 times that
    # (10 times for a small run).
    burst_rate: float = 5.0
    burst_keys: int | None = None
    # Bursts through a stretch of DynamoDB and SQS trouble (slow answers, throttling): keys in each, and how long.
    fault_burst_keys: int = 20
    fault_stretch_s: float = 6
    bound_s: float = 900  # the most any one phase may take
    budget_s: float = 540  # the most all phases together may take (deploying comes before): the demo is bounded
    deadline: float | None = None  # monotonic seconds: set from budget_s once deployed

    def bound(self) -> float:
        """How long the next phase may take: what is left of the budget, at most bound_s."""
        if self.deadline is None:
            return self.bound_s
        return max(5.0, min(self.bound_s, self.deadline - time.monotonic()))


def apply_emulator_gaps(stack: str, table_name: str, cdk_out: Path) -> list[str]:
    """Do by API what the emulator's CloudFormation skips, and say so."""
    configuration_sets = make_skipped_configuration_sets(stack, cdk_out)
    return [
        apply_ttl(table_name),
        "point-in-time recovery and the queues' TLS-only policies are in the template but not modelled by moto",
        "moto runs no Lambda code without Docker: the local runners invoke the deployed functions for their SQS "
        "and DynamoDB-stream event sources, and moto's own Docker-bound delivery is switched off",
        f"moto's CloudFormation skips the SES configuration set and its event destination: the set was made by API "
        f"({', '.join(configuration_sets)}) and named in the consumer's environment; moto's SES publishes no "
        "events, so the local publisher plays SES's part, putting the events SES documents for each email sent "
        "through the set on the emulator's default event bus, where the deployed rule routes them to the recorder",
    ]


@dataclass
class Deployed:
    consumer: DeployedConsumer
    recorder: DeployedConsumer
    relays: list[DeployedStreamFunction]
    table: str
    configuration_set: str
    outcome_publishers: list[DeployedStreamFunction]


def _deploy(options: DemoOptions, aws: LocalAws, cdk_out: Path, cdk_log: Path, say: Callable[[str], None]) -> (
    tuple[Deployed, list[str]]
):
    say(f"[2/9] cdk bootstrap + cdk deploy {options.stack} (examples/app.py) to it; log in {cdk_log}")
    context = {"functionTimeoutSeconds": str(options.function_timeout_s),
               "evidenceGraceSeconds": str(options.evidence_grace_s), "sendRate": f"{options.burst_rate:g}"}
    bootstrap_and_deploy(options.stack, options.project_dir.resolve(), cdk_out, {**os.environ}, aws.account_id,
                         aws.region, context, cdk_log)
    table = physical_id_of(options.stack, "AWS::DynamoDB::Table", "Receipts" + ChildId.DEDUPE_TABLE)
    notes = apply_emulator_gaps(options.stack, table, cdk_out)
    for note in notes:
        say(f"      emulator gap: {note}")
    functions = {c.function.handler: c for c in read_consumers(options.stack, cdk_out)}
    consumer, recorder = functions[HANDLER], functions[RECORDER_HANDLER]
    boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER_IDENTITY)
    streams = read_stream_functions(options.stack, cdk_out)
    deployed = Deployed(consumer, recorder, [s for s in streams if s.function.handler != OUTCOME_HANDLER], table,
                        ConsumerConfig.from_env(consumer.function.environment).configuration_set or "",
                        [s for s in streams if s.function.handler == OUTCOME_HANDLER])
    config = ConsumerConfig.from_env(consumer.function.environment)
    say(f"[3/9] deployed {consumer.function.name}: timeout {consumer.function.timeout_s:g} s, batch "
        f"{consumer.source.batch_size}, {consumer.source.max_concurrency} concurrent, policy "
        f"{config.delivery.value}, SES evidence grace {config.evidence_grace_ms // 1000} s; "
        f"recorder {recorder.function.name}; SES identity {SENDER_IDENTITY} verified")
    return deployed, notes


def run_demo(options: DemoOptions, say: Callable[[str], None] = print) -> Report:
    out = options.out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cdk_log, consumer_log_path = out / "cdk.log", out / "consumer.log"
    cdk_log.write_text("")
    started = time.monotonic()
    with local_aws(pointed=True) as aws:
        say(f"[1/9] embedded AWS emulator (moto) on {aws.endpoint}, account {aws.account_id}, {aws.region}")
        deployed, notes = _deploy(options, aws, out / "cdk.out", cdk_log, say)
        too_slow = machine_too_slow(deployed.consumer.source.queue_url)
        if too_slow:
            say(f"      this machine is too slow for the demo's timings to mean anything: {too_slow}; the counts "
                "(sent once, doubles, detected) still hold")
        options = replace(options, deadline=time.monotonic() + options.budget_s)
        publisher = SesEventPublisher(
            [deployed.configuration_set], put_on_default_bus(boto3.client("events")), aws.account_id, aws.region,
            DELIVERED_FAULTS, options.seed,
        ).start()
        workload = build_workload(options.keys, options.seed)
        with consumer_log_path.open("w", encoding="utf-8") as log, EventSourceRunner(
            deployed.recorder.function, deployed.recorder.source, aws.environment, log
        ) as recorder_runner:
            # The outcome publisher reads the ledger's stream for the whole demo: every transition, to the app.
            outcome_runners = [StreamEventSourceRunner(p.function, p.source, aws.environment, log).start()
                               for p in deployed.outcome_publishers]
            say(f"[4/9] SES's events played for configuration set {deployed.configuration_set} (delayed, 10% "
                "duplicated, reordered, none lost) onto the default bus; the deployed rule routes them to "
                f"{deployed.recorder.function.name}")
            faults = FaultPlan(options.fault_probability, options.seed, FAULT_KINDS)
            runner = _run_phase(options, aws, deployed, workload, faults, publisher, recorder_runner, log, say,
                                with_orders=True)
            residual = _residual_phase(options, aws, deployed, publisher, recorder_runner, log, say)
            publisher.faults = DELIVERED_FAULTS  # every event delivered again: the bursts lose none
            burst = _burst_phase(options, aws, deployed, log, say)
            fault_bursts = _fault_phase(options, aws, deployed, log, say)
            say("      the SQL outbox: orders and receipts committed in PostgreSQL, relayed by sendonce-outbox-relay")
            sql_outbox = run_sql_outbox_phase(deployed.consumer.function, deployed.consumer.source, aws.environment,
                                              log, options.orders, options.seed, aws.sent_emails, say)
            for line in sql_outbox.lines():
                say(line)
            outcome_events = _outcome_events(options, deployed, outcome_runners, say)
        publisher.stop()
        config = ConsumerConfig.from_env(deployed.consumer.function.environment)
        report = build_report(
            [sent for sent in aws.sent_emails() if not is_phase_email(sent)], workload, config.delivery.value,
            deployed.table, config.dead_letter_queue_url, runner.stats.as_dict(), notes, residual, burst, fault_bursts,
        )
        report.too_slow = too_slow or machine_too_slow(deployed.consumer.source.queue_url)
        report.outcome_events = outcome_events
        report.sql_outbox = sql_outbox
        paths = write_outputs(report, out)
        say(f"[9/9] done in {time.monotonic() - started:.0f} s; report: {', '.join(str(p) for p in paths)}; "
            f"consumer and recorder log: {consumer_log_path}")
        say(render_text(report))
    return report


def _outcome_events(options: DemoOptions, deployed: Deployed, runners: list[StreamEventSourceRunner],
                    say: Callable[[str], None]) -> OutcomeEventsCheck | None:
    """Let the publisher catch up with the ledger's stream, then read what the example app's queue heard."""
    queue_url = app_queue_url(options.stack)
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


def _run_phase(
    options: DemoOptions, aws: LocalAws, deployed: Deployed, workload: Workload, faults: FaultPlan,
    publisher: SesEventPublisher, recorder_runner: EventSourceRunner, log: IO[str], say: Callable[[str], None],
    with_orders: bool, step: str = "[5/9]",
) -> EventSourceRunner:
    sqs = boto3.client("sqs")
    queue_url = deployed.consumer.source.queue_url
    enqueue(sqs, queue_url, workload.first_wave)
    say(f"{step} enqueued {len(workload.first_wave)} jobs: " + ", ".join(f"{v} {k}" for k, v in workload.kinds.items())
        + f"; {faults.describe()}")
    with EventSourceRunner(deployed.consumer.function, deployed.consumer.source, aws.environment, log,
                           faults) as runner:
        relay_runners = [StreamEventSourceRunner(r.function, r.source, aws.environment, log).start()
                         for r in deployed.relays]
        if with_orders and relay_runners:
            outbox_table = physical_id_of(options.stack, "AWS::DynamoDB::Table", "ReceiptsOutboxTable")
            committed = write_orders_through_outbox(outbox_table, options.orders, options.seed, workload)
            say(f"      {options.orders} orders written with their receipt in one transaction (outbox); "
                f"each transaction retried once: {committed} retries committed, the outbox kept each receipt "
                "intent once (ON CONFLICT DO NOTHING)")
        _reenqueue_midway(runner, sqs, queue_url, workload.reenqueued, len(workload.first_wave), options.bound(), say)

        def progress(elapsed: float, depth: dict[str, int]) -> None:
            s = runner.stats
            say(f"      {elapsed:6.1f}s  delivered {s.records_delivered:4d}  deleted {s.records_deleted:4d}  "
                f"queue {depth['visible']:3d} waiting / {depth['in_flight']:3d} in flight  "
                f"faults {s.faults_armed} (killed {s.workers_killed})  timeouts {s.timeouts}  "
                f"SES events {publisher.stats.events_published}")

        drained = runner.run_until_drained(options.bound(), progress,
                                           upstream_idle=lambda: all(r.idle() for r in relay_runners))
        for relay_runner in relay_runners:
            relay_runner.stop()
    settled = recorder_runner.run_until_drained(options.bound(), upstream_idle=lambda: publisher.pending() == 0)
    if not (drained and settled):
        say(f"      the queues did not drain within the time left ({options.budget_s:g} s for all phases, at most "
            f"{options.bound_s:g} s for one); reporting what happened so far")
    return runner


def _burst_phase(options: DemoOptions, aws: LocalAws, deployed: Deployed, log: IO[str],
                 say: Callable[[str], None]) -> BurstReport | None:
    """A sale's receipts at once: far more jobs than SES's sending rate takes, with no fault but the throttling."""
    rate = options.burst_rate
    keys = options.burst_keys if options.burst_keys is not None else int((10 if options.keys < 100 else 15) * rate)
    if keys <= 0:
        return None
    config = ConsumerConfig.from_env(deployed.consumer.function.environment)
    pace = "no limit" if config.max_send_rate is None else f"{config.max_send_rate:g}"
    say(f"[7/9] a burst of {keys} keys while the emulator's SES accepts {rate:g} emails/s and throttles the rest "
        f"(the consumer paces each of its {deployed.consumer.source.max_concurrency} instances at {pace}/s)")
    burst = run_burst(deployed.consumer.function, deployed.consumer.source, aws.environment,
                      config.dead_letter_queue_url,
                      aws.sent_subjects, rate, keys, options.seed + 2,
                      log, options.bound())
    for line in burst.lines():
        say(f"    {line.strip()}")
    return burst


def _fault_phase(options: DemoOptions, aws: LocalAws, deployed: Deployed, log: IO[str],
                 say: Callable[[str], None]) -> list[FaultBurstReport]:
    """Two more bursts, each through a stretch of trouble in the consumer's own DynamoDB and SQS calls: throttled,
    then answering late past its client timeouts (the call carried out, the answer lost) with invocations killed
    at their deadline and right after a delayed copy. A fault may delay an email, never lose, double or
    dead-letter it, nor multiply the queue."""
    if options.fault_burst_keys <= 0:
        say("[8/9] slow and throttled answers: not in this run (the full demo and make test run them)")
        return []
    function = deployed.consumer.function
    config = ConsumerConfig.from_env(function.environment)
    read_timeout_s = config.budget.ledger_call_timeouts_s[1]
    stretches = [dynamodb_throttling(options.fault_stretch_s),
                 late_answers(options.fault_stretch_s, late_s=round(read_timeout_s + 0.1, 2))]
    say(f"[8/9] slow and throttled answers: {len(stretches)} bursts of {options.fault_burst_keys} keys, each through "
        f"{options.fault_stretch_s:g} s of trouble in the consumer's DynamoDB and SQS calls (a local proxy plays it; "
        f"the consumer's read timeout is {read_timeout_s * 1000:.0f} ms)")
    reports = []
    for n, stretch in enumerate(stretches):
        report = run_fault_burst(
            function, deployed.consumer.source, aws.environment, config.dead_letter_queue_url,
            deployed.table, aws.sent_subjects, options.burst_rate,
            options.fault_burst_keys, options.seed + 3 + n, stretch, log, options.bound(), copy_kills=0.5,
            first=700_000 + 100_000 * n)
        for line in report.lines():
            say(f"    {line.strip()}")
        reports.append(report)
    return reports


def _residual_phase(
    options: DemoOptions, aws: LocalAws, deployed: Deployed, publisher: SesEventPublisher,
    recorder_runner: EventSourceRunner, log: IO[str], say: Callable[[str], None],
) -> Residual | None:
    """Keys sent while SES's events for some emails come late or never: what the evidence cannot settle."""
    keys = options.residual_keys if options.residual_keys is not None else max(8, options.keys // 5)
    if keys <= 0:
        return None
    grace_s = options.evidence_grace_s
    # Late past the decision: the redelivery (6 x the function timeout) plus the grace period, and then some.
    late_s = 8 * options.function_timeout_s + grace_s
    publisher.faults = EventFaults(delay_s=0.2, outcome_delay_s=late_s, drop_send=options.residual_send_events_dropped)
    dropped_before = len(publisher.stats.send_events_dropped)
    say(f"[6/9] the residual: {keys} more keys while {options.residual_send_events_dropped:.0%} of SES's Send events "
        f"are lost and the rest of each email's events come after the {grace_s} s grace period; workers killed "
        "right after SES accepted")
    workload = build_workload(keys, options.seed + 1, first=100_000, poison=False)
    # The first invocations are always killed right after SES accepted, so detection is exercised every run.
    faults = FaultPlan(max(0.2, options.fault_probability), options.seed + 1, ("after_send", "lost_answer"),
                       forced=RESIDUAL_FORCED_CRASHES)
    _run_phase(options, aws, deployed, workload, faults, publisher, recorder_runner, log, say, with_orders=False,
               step="     ")
    return Residual(workload=workload, send_events_dropped=set(publisher.stats.send_events_dropped[dropped_before:]))


def write_orders_through_outbox(outbox_table: str, orders: int, seed: int, workload: Workload) -> int:
    """Each order and its receipt in one DynamoDB transaction, then the same transaction again, as a client
    retrying after a timeout would. Returns how many retries committed: a duplicate intent never cancels the
    business write (a cancelled one raises here), and the outbox keeps the first."""
    from sendonce_producer import EmailJob, dedupe_key, outbox_put

    dynamodb: Any = boto3.client("dynamodb")
    orders_table = f"demo-orders-{seed}"
    dynamodb.create_table(TableName=orders_table, KeySchema=[{"AttributeName": "orderId", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "orderId", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    committed = 0
    for n in range(orders):
        order_id, recipient = f"order-{20_000 + n}", f"buyer{n}@example.org"
        key = dedupe_key(order_id, "confirmed", recipient=recipient)
        subject = f"Order {order_id} confirmed"
        job = EmailJob(dedupe_key=key, sender=SENDER, to=[recipient], subject=subject, text="We got your order.")
        transaction = [
            {"Put": {"TableName": orders_table, "Item": {"orderId": {"S": order_id}, "total": {"N": str(10 + n)}}}},
            outbox_put(outbox_table, job),
        ]
        workload.add_outbox_order(key, subject)
        dynamodb.transact_write_items(TransactItems=transaction)
        dynamodb.transact_write_items(TransactItems=transaction)
        committed += 1
    return committed


def _reenqueue_midway(
    runner: EventSourceRunner, sqs: object, queue_url: str, bodies: list[str], first_wave: int, bound_s: float,
    say: Callable[[str], None],
) -> None:
    """An upstream service re-enqueues some jobs while the first copies are being handled."""
    deadline = time.monotonic() + bound_s
    while runner.stats.records_delivered < first_wave // 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # polled with a bound: the runner's own threads move the count
    enqueue(sqs, queue_url, bodies)
    say(f"      re-enqueued {len(bodies)} jobs with new message ids (an upstream retry)")
