"""Fault scenarios, each during a burst: the consumer as Lambda runs it (worker processes, real deadlines, the
event source played with several pollers), SES limited to its rate, SES's events recorded, and the consumer's
DynamoDB and SQS in trouble for a stretch: throttled, or answering late past the client timeouts, with
invocations killed at their deadline and right after a delayed copy (``sendonce_local.demo.scenarios.fault_burst``).

Every key is sent once (counted in the emulator's SES), nothing is dead-lettered, the queue never holds more than
twice the jobs, and under never-resend nothing is left UNKNOWN that SES never saw.
"""

from __future__ import annotations

import json
import time

import boto3
import pytest
from aws_cdk import Duration
from consumer_harness import CONFIGURATION_SET, PIPELINE_TAG

from sendonce_constructs import lane_rates, rules
from sendonce_constructs.runtime_asset import HANDLER, runtime_asset_dir
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import ConsumerConfig, TimeBudget
from sendonce_local.demo.scenarios.fault_burst import dynamodb_throttling, late_answers, run_fault_burst
from sendonce_local.lambda_service.instances import FunctionSpec
from sendonce_local.lambda_service.sqs_source import EventSourceSpec

# Under a minute each in make test; make test-soak runs the never-resend one too (see the README's "Slow answers").
FUNCTION_TIMEOUT_S = 3
RATE, POLLERS, KEYS = 5.0, 5, 20
STRETCH_S = 6


def deployed_like_the_construct(pipeline, policy: DeliveryPolicy) -> tuple[FunctionSpec, EventSourceSpec]:
    """The consumer staged from the runtime with the environment the construct gives a 3 s function."""
    sqs = boto3.client("sqs")
    dlq_arn = sqs.get_queue_attributes(QueueUrl=pipeline.dead_letter_queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName="burst-jobs", Attributes={
        "VisibilityTimeout": str(rules.minimum_visibility_timeout_s(FUNCTION_TIMEOUT_S, 0)),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    rate = lane_rates.instance_rate(RATE, POLLERS)
    batch_size = lane_rates.paced_batch_size(Duration.seconds(FUNCTION_TIMEOUT_S), rate)
    environment = ConsumerConfig(
        table_name=pipeline.table_name, dead_letter_queue_url=pipeline.dead_letter_queue_url, queue_url=url,
        parallelism=batch_size, max_receive_count=5, delivery=policy,
        max_send_rate=rate,
        time_budget=TimeBudget.for_function_timeout(FUNCTION_TIMEOUT_S), evidence_grace_ms=10_000,
        pipeline_tag=PIPELINE_TAG, configuration_set=CONFIGURATION_SET,
    ).to_env()
    function = FunctionSpec("consumer", HANDLER, runtime_asset_dir(), environment, timeout_s=FUNCTION_TIMEOUT_S)
    return function, EventSourceSpec(url, arn, batch_size=batch_size, max_concurrency=POLLERS)


def burst(pipeline, stretch, policy=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE):
    function, source = deployed_like_the_construct(pipeline, policy)
    publisher = pipeline.ses_events().start()  # SES's events reach the recorder within a second
    try:
        report = run_fault_burst(function, source, pipeline.aws.environment, pipeline.dead_letter_queue_url,
                                 pipeline.table_name, pipeline.aws.sent_subjects,
                                 RATE, KEYS, seed=5, stretch=stretch, bound_s=240, copy_kills=0.5)
        bound = time.monotonic() + 30
        while publisher.pending() and time.monotonic() < bound:
            time.sleep(0.1)  # polled with a bound: the publisher's thread delivers the last events
    finally:
        publisher.stop()
    return report


def check(report) -> None:
    assert report.drained, report.lines()
    assert report.emails_per_key == {1: KEYS}, report.lines()
    assert report.dead_letters == 0, report.lines()
    assert report.peak_depth <= 2 * report.jobs, report.lines()
    assert report.unknown_never_seen == [], report.lines()
    assert report.ok


def test_a_burst_through_a_stretch_of_dynamodb_throttling_sends_every_key_once_and_dead_letters_nothing(pipeline):
    report = burst(pipeline, dynamodb_throttling(STRETCH_S))
    check(report)
    assert report.proxy_hits, (report.proxy_requests, report.lines())  # the stretch really refused calls


@pytest.mark.parametrize("policy", [DeliveryPolicy.RESEND_WITHOUT_EVIDENCE,
                                    pytest.param(DeliveryPolicy.NEVER_RESEND, marks=pytest.mark.soak)],
                         ids=lambda p: p.value)
def test_a_burst_through_late_dynamodb_and_sqs_answers_and_deadline_kills_multiplies_and_loses_nothing(
        pipeline, policy):
    report = burst(pipeline, late_answers(STRETCH_S), policy)
    check(report)
    assert report.proxy_hits, (report.proxy_requests, report.lines())  # answers really came late
    # Half the invocations were armed to die right after a delayed copy (before the acknowledgement); those that
    # sent one were killed there, and others at their deadline (test_copy_bound makes every such kill land).
    assert report.runner["faults_armed"] > 0, report.runner
