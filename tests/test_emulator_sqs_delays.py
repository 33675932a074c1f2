"""The emulator's SQS plays delays shorter when a run asks (the demo's SES stops: a parked job's 15 minutes), through
a plain boto3 sqs client and the control over HTTP; off until set, and moto's own reset turns it off, also in an
emulator running as its own process."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from serve_process import served
from test_emulator_ses_account import control, moto_reset

from sendonce_local.emulator.sqs_delays import DELAYS_CONTROL_PATH


def counts(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, delayed) messages."""
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesDelayed"])


def visible_within(sqs: Any, url: str, expected: int, bound_s: float) -> bool:
    """Poll until ``expected`` messages are visible, or the bound passes."""
    bound = time.monotonic() + bound_s
    while time.monotonic() < bound:
        if counts(sqs, url)[0] == expected:
            return True
        time.sleep(0.1)
    return False


def test_a_longest_delay_shortens_longer_delays_alone_and_batched_and_reset_ends_it(aws):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="delays")["QueueUrl"]
    assert control(aws.endpoint, DELAYS_CONTROL_PATH, {"longestDelayS": 1}) == (200, '{"longestDelayS": 1}')
    sqs.send_message(QueueUrl=url, MessageBody="parked", DelaySeconds=900)
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "a", "MessageBody": "parked too", "DelaySeconds": 900}])
    sqs.send_message(QueueUrl=url, MessageBody="no delay")
    assert counts(sqs, url) == (1, 2)  # delayed, as asked, only shorter
    assert visible_within(sqs, url, 3, bound_s=10)

    control(aws.endpoint, DELAYS_CONTROL_PATH, {"longestDelayS": None})  # SQS's own delays again
    sqs.send_message(QueueUrl=url, MessageBody="fifteen minutes", DelaySeconds=900)
    control(aws.endpoint, DELAYS_CONTROL_PATH, {"longestDelayS": 1})
    moto_reset(aws.endpoint)  # forgets the setting with the queues
    url = sqs.create_queue(QueueName="delays")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="fifteen minutes", DelaySeconds=900)
    assert counts(sqs, url) == (0, 1)


@pytest.mark.parametrize("body", [{"longestDelayS": -1}, {"longestDelayS": "5"}, {"longestDelayS": True},
                                  {"longestDelayS": 1.5}, [1]])
def test_a_bad_delay_control_body_is_refused_in_one_line(aws, body):
    status, text = control(aws.endpoint, DELAYS_CONTROL_PATH, body)
    assert status == 400 and "\n" not in text and "error" in json.loads(text)


def test_an_emulator_in_its_own_process_shortens_delays_over_http(tmp_path: Path):
    with served(tmp_path / "stderr.txt") as (_, exports):
        endpoint = exports["AWS_ENDPOINT_URL"]
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=exports["AWS_REGION"],
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        url = sqs.create_queue(QueueName="served-delays")["QueueUrl"]
        assert control(endpoint, DELAYS_CONTROL_PATH, {"longestDelayS": 1})[0] == 200
        sqs.send_message(QueueUrl=url, MessageBody="parked", DelaySeconds=900)
        assert visible_within(sqs, url, 1, bound_s=10)
