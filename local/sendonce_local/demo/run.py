"""The main job, locally: deploy the example app to the embedded emulator with the real CDK CLI, send it real
traffic through the deployed consumer with workers killed on purpose, and report what SES accepted.

The phases run in order (each a module of ``demo.phases``); the recorder and the outcome publisher run throughout,
as `sendonce-local run` runs a stack's functions, and each phase starts the runners it plays.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import boto3

from sendonce_contract.deploy_config import ConsumerConfig

from ..emulator.server import local_aws
from ..emulator.ses_publisher import EventFaults, SesEventPublisher, put_on_default_bus
from ..lambda_service.sqs_source import FaultPlan
from ..lambda_service.stack_runners import StackRunners
from ..lambda_service.worker import FAULT_KINDS
from .example_app import cdk_context, deploy
from .machine import machine_too_slow
from .options import DemoOptions
from .phase import PhaseContext
from .phases import PHASES
from .phases.bursts import burst_phase, fault_phase
from .phases.residual import residual_phase
from .phases.traffic import run_phase
from .report import Report
from .report_build import build_report
from .report_chart import write_outputs
from .report_text import render_text
from .steps import step
from .workload import build_workload

# SES's events as the demo plays them outside the residual phase: late, duplicated and reordered, none lost.
DELIVERED_FAULTS = EventFaults(delay_s=0.2, outcome_delay_s=0.5, duplicate=0.1, reorder=True)


def run_demo(options: DemoOptions, say: Callable[[str], None] = print) -> Report:
    out = options.out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cdk_log, consumer_log_path = out / "cdk.log", out / "consumer.log"
    cdk_log.write_text("")
    started = time.monotonic()
    with local_aws(pointed=True) as aws:
        say(f"{step(1)} embedded AWS emulator (moto) on {aws.endpoint}, account {aws.account_id}, {aws.region}")
        context = cdk_context(options.function_timeout_s, options.evidence_grace_s, options.burst_rate)
        deployed, notes = deploy(aws, options.stack, options.project_dir, context, out / "cdk.out", cdk_log, say)
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
        with consumer_log_path.open("w", encoding="utf-8") as log:
            # The outcome publisher reads the ledger's stream for the whole demo: every transition, to the app.
            # And EventBridge's scheduled rules, played at their own rates: the schedule watch of the waiting room
            # (every minute) and the quota watch.
            standing = StackRunners(aws.environment, log).start([deployed.recorder], deployed.outcome_publishers)
            standing.play_schedules(list(deployed.schedules))
            for schedule in deployed.schedules:
                say(f"      EventBridge's schedule {schedule.rule} played: {schedule.function.name} every "
                    f"{schedule.every_s:g} s (moto never fires a scheduled rule)")
            try:
                recorder_runner = standing.runner_of(deployed.recorder)
                say(f"{step(4)} SES's events played for configuration set {deployed.configuration_set} (delayed, 10% "
                    "duplicated, reordered, none lost) onto the default bus; the deployed rule routes them to "
                    f"{deployed.recorder.function.name}")
                faults = FaultPlan(options.fault_probability, options.seed, FAULT_KINDS)
                runner = run_phase(options, aws, deployed, workload, faults, publisher, recorder_runner, log, say,
                                   with_orders=True)
                residual = residual_phase(options, aws, deployed, publisher, recorder_runner, log, say)
                publisher.faults = DELIVERED_FAULTS  # every event delivered again: the bursts lose none
                burst = burst_phase(options, aws, deployed, log, say)
                fault_bursts = fault_phase(options, aws, deployed, log, say)
                played = PhaseContext(options, aws, deployed, log, say, standing)
                phases = {phase.name: phase.run(played) for phase in PHASES}
            finally:
                standing.stop()
        publisher.stop()
        config = ConsumerConfig.from_env(deployed.consumer.function.environment)
        report = build_report(  # each phase counts its own emails
            [sent for sent in aws.sent_emails() if not any(phase.owns(sent) for phase in PHASES)], workload,
            config.delivery.value,
            deployed.table, config.dead_letter_queue_url, runner.stats.as_dict(), notes, residual, burst, fault_bursts,
        )
        report.too_slow = too_slow or machine_too_slow(deployed.consumer.source.queue_url)
        report.phases = phases
        paths = write_outputs(report, out)
        say(f"{step(11)} done in {time.monotonic() - started:.0f} s; report: {', '.join(str(p) for p in paths)}; "
            f"consumer and recorder log: {consumer_log_path}")
        say(render_text(report))
    return report
