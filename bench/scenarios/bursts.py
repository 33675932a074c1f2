"""9. A burst far beyond SES's sending rate, in emails and (9b) in recipients, each with its own in-process
emulator."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

import boto3

BURST_RATE = 5.0  # what the emulator's SES accepts a second
BURST_POLLERS = 5  # Lambda instances, as max_concurrency caps them
RECIPIENT_RATE = 25.0  # recipients a second the emulator's SES accepts in the recipients burst
RECIPIENTS_PER_JOB = 5


@contextmanager
def _burst_consumer(send_rate: float, timeout_s: int = 30, pollers: int = BURST_POLLERS, reads_ses_rate: bool = False,
                    ) -> Iterator[tuple[Any, Any, Any, str, Callable[[], list[str]], IO[str]]]:
    """An emulator of its own with the burst's table, queue and DLQ (and the pace table where the construct makes
    one: its instances at most one email a second each, more than one of them), and the consumer as deployed with
    default props plus ``send_rate`` and ``max_concurrency`` = ``pollers``: as many instances as the construct runs
    of them (no more than the rate in emails a second, two at least), each paced at send_rate over their number, one
    poller per instance: (function, event source, emulator environment, DLQ url, the subjects SES accepted, the
    runners' log). With ``reads_ses_rate`` the consumer plans under SES's own rate, as the construct deploys a paced
    lane (its planned rate in the consumer's settings); without, it paces at its share of send_rate alone, as before
    it did."""
    from aws_cdk import Duration

    from sendonce_constructs import lane_rates
    from sendonce_constructs.runtime_asset import runtime_asset_dir
    from sendonce_contract.deploy_config import ConsumerConfig, TimeBudget
    from sendonce_local.emulator.server import local_aws
    from sendonce_local.lambda_service.instances import FunctionSpec
    from sendonce_local.lambda_service.sqs_source import EventSourceSpec
    from sendonce_runtime.entry_points import HANDLER

    with local_aws(pointed=True) as aws:
        sqs, dynamodb = boto3.client("sqs"), boto3.client("dynamodb")
        dynamodb.create_table(TableName="burst", KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        dlq = sqs.create_queue(QueueName="burst-dlq")
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq["QueueUrl"], AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        queue = sqs.create_queue(QueueName="burst-jobs", Attributes={
            "VisibilityTimeout": str(6 * timeout_s),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})
        boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
        function_timeout = Duration.seconds(timeout_s)
        instances = lane_rates.paced_cap(send_rate, pollers)
        per_instance = lane_rates.instance_rate(send_rate, pollers)
        assert instances is not None and per_instance is not None
        environment = ConsumerConfig(
            table_name="burst", dead_letter_queue_url=dlq["QueueUrl"], queue_url=queue["QueueUrl"],
            parallelism=10, max_send_rate=per_instance, max_receive_count=5,
            planned_send_rate=send_rate if reads_ses_rate else None,
            time_budget=TimeBudget.for_function_timeout(timeout_s)).to_env()
        function = FunctionSpec("burst-consumer", HANDLER, runtime_asset_dir(), environment, timeout_s=timeout_s)
        arn = sqs.get_queue_attributes(QueueUrl=queue["QueueUrl"], AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        # The batch size the construct derives for this rate and function timeout.
        batch_size = lane_rates.paced_batch_size(function_timeout, per_instance)
        source = EventSourceSpec(queue["QueueUrl"], arn, batch_size=batch_size, max_concurrency=instances)
        with open(os.devnull, "w") as log:
            yield (function, source, aws.environment, dlq["QueueUrl"],
                   aws.sent_subjects, log)


def burst_scenario(factor: int) -> Any:
    """``factor`` x R jobs at once (with duplicates and re-enqueues) against an SES accepting R emails a second,
    the consumer with send_rate = R, played as Lambda's event source. Runs its own in-process emulator."""
    from sendonce_local.demo.scenarios.load import run_burst

    with _burst_consumer(BURST_RATE) as (function, source, environment, dlq_url, subjects, log):
        return run_burst(function, source, environment, dlq_url, subjects, BURST_RATE, int(factor * BURST_RATE),
                         seed=9, log=log)


def recipient_burst_scenario(factor: int) -> Any:
    """``factor`` x R recipients at once in jobs of five recipients (to, cc, bcc), against an SES accepting R
    recipients a second, the consumer with send_rate = R (paced in recipients), as in section 9 otherwise."""
    from sendonce_local.demo.scenarios.recipient_burst import run_recipient_burst

    with _burst_consumer(RECIPIENT_RATE) as (function, source, environment, dlq_url, subjects, log):
        return run_recipient_burst(function, source, environment, dlq_url, subjects, RECIPIENT_RATE,
                                   int(factor * RECIPIENT_RATE / RECIPIENTS_PER_JOB), RECIPIENTS_PER_JOB, seed=11,
                                   log=log)


PACING_RATE = 5.0  # what the emulator's SES accepts a second in the pacing section
PACING_TIMEOUTS_S = (3, 5, 30)
PACING_POLLERS = (2, 5, 20)


def pacing_scenario(factor: int, repeats: int, timeouts_s: tuple[int, ...] = PACING_TIMEOUTS_S,
                    pollers: tuple[int, ...] = PACING_POLLERS) -> dict[tuple[int, int], list[Any]]:
    """9c. ``factor`` x R jobs at once for each function timeout and number of instances (pollers), the consumer
    deployed as the construct derives it (batch size from each instance's share, within the function timeout), each
    run with its own in-process emulator: the burst reports of each pair, ``repeats`` of them."""
    from sendonce_local.demo.scenarios.load import run_burst

    reports: dict[tuple[int, int], list[Any]] = {}
    for timeout_s in timeouts_s:
        for count in pollers:
            for repeat in range(repeats):
                with _burst_consumer(PACING_RATE, timeout_s, count) as (function, source, environment, dlq_url,
                                                                        subjects, log):
                    reports.setdefault((timeout_s, count), []).append(run_burst(
                        function, source, environment, dlq_url, subjects, PACING_RATE, int(factor * PACING_RATE),
                        seed=21 + repeat, log=log))
    return reports


CEILING_SEND_RATE = 14.0  # the example app's send_rate (SES's production default)
CEILING_SES_RATE = 4.0  # what the emulator's SES accepts a second: less than the pipeline was told
CEILING_POLLERS = 5


def ses_rate_ceiling_scenario(factor: int, repeats: int, timeouts_s: tuple[int, ...] = (3, 5),
                              ) -> dict[tuple[int, bool], list[Any]]:
    """9g. ``factor`` x SES's rate in jobs at once, the pipeline's ``send_rate`` above what SES accepts, for each
    function timeout: the consumer pacing at its share of send_rate alone (as before issue 56) and planning under
    SES's own rate, alternating in each repeat so drift hits both alike, each run with its own in-process emulator:
    the burst reports by (function timeout, reads SES's rate)."""
    from sendonce_local.demo.scenarios.load import run_burst

    reports: dict[tuple[int, bool], list[Any]] = {}
    for repeat in range(repeats):
        for timeout_s in timeouts_s:
            for reads in (False, True):
                with _burst_consumer(CEILING_SEND_RATE, timeout_s, CEILING_POLLERS, reads_ses_rate=reads) as (
                        function, source, environment, dlq_url, subjects, log):
                    reports.setdefault((timeout_s, reads), []).append(run_burst(
                        function, source, environment, dlq_url, subjects, CEILING_SES_RATE,
                        int(factor * CEILING_SES_RATE), seed=41 + repeat, log=log))
    return reports


FAULT_TIMEOUT_S = 5  # the demo's function timeout
FAULT_STRETCH_S = 6.0  # the demo's stretch of trouble


def fault_burst_scenario(factor: int, repeats: int) -> dict[str, list[Any]]:
    """9e. ``factor`` x R jobs at once through a stretch of DynamoDB throttling, and (its own emulator each run)
    through a stretch of DynamoDB and SQS answers late past the consumer's read timeout, with invocations killed at
    their deadline and half of them right after a delayed copy, as the demo's fault phase runs them: the fault
    burst reports of each stretch, ``repeats`` of them (the queue's peak depth sampled outside the consumer)."""
    from sendonce_contract.deploy_config import TimeBudget
    from sendonce_local.demo.scenarios.fault_burst import dynamodb_throttling, late_answers, run_fault_burst

    read_timeout_s = TimeBudget.for_function_timeout(FAULT_TIMEOUT_S).ledger_call_timeouts_s[1]
    stretches = [dynamodb_throttling(FAULT_STRETCH_S),
                 late_answers(FAULT_STRETCH_S, late_s=round(read_timeout_s + 0.1, 2))]
    reports: dict[str, list[Any]] = {}
    for repeat in range(repeats):
        for n, stretch in enumerate(stretches):
            with _burst_consumer(BURST_RATE, FAULT_TIMEOUT_S) as (function, source, environment, dlq_url, subjects,
                                                                   log):
                reports.setdefault(stretch.describe(), []).append(run_fault_burst(
                    function, source, environment, dlq_url, "burst", subjects, BURST_RATE,
                    int(factor * BURST_RATE), seed=31 + 2 * repeat + n, stretch=stretch, log=log, copy_kills=0.5))
    return reports
