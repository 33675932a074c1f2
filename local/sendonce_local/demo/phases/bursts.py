"""Bursts through the deployed consumer: a sale's receipts far past SES's rate, then bursts through a stretch of
DynamoDB and SQS trouble (the scenarios of ``demo.scenarios``, run on the deployed function)."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

from sendonce_contract.deploy_config import ConsumerConfig

from ...emulator.server import LocalAws
from ..example_app import Deployed
from ..options import DemoOptions
from ..scenarios.fault_burst import FaultBurstReport, dynamodb_throttling, late_answers, run_fault_burst
from ..scenarios.load import BurstReport, run_burst
from ..steps import step


def burst_phase(options: DemoOptions, aws: LocalAws, deployed: Deployed, log: IO[str],
                 say: Callable[[str], None]) -> BurstReport | None:
    """A sale's receipts at once: far more jobs than SES's sending rate takes, with no fault but the throttling."""
    rate = options.burst_rate
    keys = options.burst_keys if options.burst_keys is not None else int((10 if options.keys < 100 else 15) * rate)
    if keys <= 0:
        return None
    config = ConsumerConfig.from_env(deployed.consumer.function.environment)
    pace = "no limit" if config.max_send_rate is None else f"{config.max_send_rate:g}"
    say(f"{step(7)} a burst of {keys} keys while the emulator's SES accepts {rate:g} emails/s and throttles the rest "
        f"(the consumer paces each of its {deployed.consumer.source.max_concurrency} instances at {pace}/s, in batches "
        f"of {deployed.consumer.source.batch_size})")
    burst = run_burst(deployed.consumer.function, deployed.consumer.source, aws.environment,
                      config.dead_letter_queue_url,
                      aws.sent_subjects, rate, keys, options.seed + 2,
                      log, options.bound())
    for line in burst.lines():
        say(f"    {line.strip()}")
    return burst


def fault_phase(options: DemoOptions, aws: LocalAws, deployed: Deployed, log: IO[str],
                 say: Callable[[str], None]) -> list[FaultBurstReport]:
    """Two more bursts, each through a stretch of trouble in the consumer's own DynamoDB and SQS calls: throttled,
    then answering late past its client timeouts (the call carried out, the answer lost) with invocations killed
    at their deadline and right after a delayed copy. A fault may delay an email, never lose, double or
    dead-letter it, nor multiply the queue."""
    if options.fault_burst_keys <= 0:
        say(f"{step(8)} slow and throttled answers: not in this run (the full demo and make test run them)")
        return []
    function = deployed.consumer.function
    config = ConsumerConfig.from_env(function.environment)
    read_timeout_s = config.budget.ledger_call_timeouts_s[1]
    stretches = [dynamodb_throttling(options.fault_stretch_s),
                 late_answers(options.fault_stretch_s, late_s=round(read_timeout_s + 0.1, 2))]
    say(f"{step(8)} slow and throttled answers: {len(stretches)} bursts of {options.fault_burst_keys} keys, each "
        f"through {options.fault_stretch_s:g} s of trouble in the consumer's DynamoDB and SQS calls (a local proxy "
        f"plays it; the consumer's read timeout is {read_timeout_s * 1000:.0f} ms)")
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

