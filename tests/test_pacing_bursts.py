"""A burst past the pipeline's send rate, at the function timeouts users pick: the consumer as Lambda runs it
(worker processes, real deadlines, the event source played with its pollers), deployed as the construct would
deploy it (its batch size derived from the function timeout, send_rate and max_concurrency), SES limited to the
rate. Every key is sent once (counted in the emulator's SES) and nothing is dead-lettered. The rate, the drain time
and the SQS requests per email are aims, measured in the bench (BENCHMARKS.md section 9c), not here: on a loaded
machine they move with the scheduler, and the guarantee does not."""

from __future__ import annotations

import json

import boto3
import pytest
from aws_cdk import Duration

from sendonce_constructs import lane_rates, rules
from sendonce_constructs.runtime_asset import HANDLER, runtime_asset_dir
from sendonce_contract.deploy_config import ConsumerConfig, TimeBudget
from sendonce_local.demo.scenarios.load import run_burst
from sendonce_local.lambda_service.instances import FunctionSpec
from sendonce_local.lambda_service.sqs_source import EventSourceSpec

RATE, POLLERS, KEYS = 4.0, 2, 16  # a burst of four seconds of sending, with its duplicates and re-enqueues


@pytest.fixture
def ses_events(pipeline):
    """SES's events for the pipeline's sends, published to its recorder as they come, as the construct deploys a
    pipeline (ses_events on): a worker killed at its 3 s deadline after SES accepted its send, which a loaded host
    makes likelier, is settled by SES's word rather than sent again (the residual without them)."""
    publisher = pipeline.ses_events().start()
    yield
    publisher.stop()


def deployed_like_the_construct(pipeline, function_timeout_s: int,
                                pollers: int = POLLERS) -> tuple[FunctionSpec, EventSourceSpec]:
    """The consumer staged from the runtime with the environment and event source the construct gives a paced
    pipeline (send_rate = RATE, max_concurrency = ``pollers``: no more instances of them than the rate in emails a
    second, SES's events on) with this function timeout."""
    sqs = boto3.client("sqs")
    timeout = Duration.seconds(function_timeout_s)
    rate = lane_rates.instance_rate(RATE, pollers)
    instances = lane_rates.paced_cap(RATE, pollers)
    assert rate is not None and instances is not None
    dlq_arn = sqs.get_queue_attributes(QueueUrl=pipeline.dead_letter_queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=f"paced-{function_timeout_s}-{pollers}", Attributes={
        "VisibilityTimeout": str(rules.minimum_visibility_timeout_s(function_timeout_s, 0)),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "5"})})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    batch_size = lane_rates.paced_batch_size(timeout, rate)
    environment = ConsumerConfig(
        table_name=pipeline.table_name, dead_letter_queue_url=pipeline.dead_letter_queue_url, queue_url=url,
        parallelism=batch_size, max_receive_count=5,
        max_send_rate=rate,
        time_budget=TimeBudget.for_function_timeout(function_timeout_s), **pipeline.evidence_settings(),
    ).to_env()
    function = FunctionSpec("paced", HANDLER, runtime_asset_dir(), environment, timeout_s=function_timeout_s)
    return function, EventSourceSpec(url, arn, batch_size=batch_size, max_concurrency=instances)


@pytest.mark.parametrize("function_timeout_s", [3, 5, 30], ids=lambda s: f"{s}s")
def test_a_burst_is_sent_once_at_every_function_timeout(pipeline, ses_events, function_timeout_s):
    function, source = deployed_like_the_construct(pipeline, function_timeout_s)
    burst = run_burst(function, source, pipeline.aws.environment, pipeline.dead_letter_queue_url,
                      pipeline.aws.sent_subjects, RATE, KEYS, seed=3, bound_s=120)
    assert burst.ok, burst.lines()
    assert burst.emails_per_key == {1: KEYS} and burst.dead_letters == 0, burst.lines()
    assert burst.sqs_requests > 0 and burst.other_sqs_requests == 0, burst.lines()  # counted, on its own queues
    assert pipeline.recorder_outcomes(), "SES's events reached the recorder"


def test_more_pollers_than_the_rate_gives_one_a_second_run_as_the_construct_runs_them_and_send_once(pipeline,
                                                                                                      ses_events):
    """max_concurrency = 20 at 4/s would be a send every 5 s an instance; the construct runs 4 (1/s each), and a
    burst of twice the keys through them is sent once, none dead-lettered."""
    function, source = deployed_like_the_construct(pipeline, 3, pollers=20)
    assert source.max_concurrency == 4
    keys = 2 * KEYS
    burst = run_burst(function, source, pipeline.aws.environment, pipeline.dead_letter_queue_url,
                      pipeline.aws.sent_subjects, RATE, keys, seed=4, bound_s=120)
    assert burst.ok and burst.emails_per_key == {1: keys} and burst.dead_letters == 0, burst.lines()


def test_the_batch_size_is_what_one_instance_sends_in_one_invocation():
    """With pacing, a batch holds what one instance sends in a second at its share of the rate (two at 2 emails/s
    an instance, one at 0.5), one at least, and no more than it can send in one invocation received a receive's
    lead before its slot (a record of a 3 s function may wait 1.05 s, planned as 0.945 s)."""
    assert lane_rates.paced_batch_size(Duration.seconds(3), lane_rates.instance_rate(4.0, 2)) == 2
    assert lane_rates.paced_batch_size(Duration.seconds(5), lane_rates.instance_rate(4.0, 2)) == 2
    assert lane_rates.paced_batch_size(Duration.seconds(30), lane_rates.instance_rate(4.0, 2)) == 2
    assert lane_rates.paced_batch_size(Duration.seconds(3), lane_rates.instance_rate(5.0, 20)) == 1
    assert lane_rates.paced_batch_size(Duration.seconds(30), 0.5) == 1
    assert lane_rates.paced_batch_size(Duration.seconds(3), None) == 10  # no pacing: SQS's 10
