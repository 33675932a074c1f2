"""SES accepted the send but answered after the read timeout: exactly one request, so exactly one email."""

from __future__ import annotations

import contextlib

import boto3
from botocore.config import Config
from botocore.exceptions import ReadTimeoutError
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract.deploy_config import TimeBudget


def test_read_timeout_after_acceptance_is_not_retried(pipeline, ses_faults):
    ses_faults.script(Fault.ACCEPT_THEN_HANG)
    record = sqs_record(job("reset:1:u1"))
    consumer = pipeline.consumer(time_budget=TimeBudget(ses_read_timeout_s=0.5))

    response = consumer.handle(event(record), FakeContext(FakeClock()))

    assert ses_faults.send_requests == 1
    assert pipeline.emails_for("reset:1:u1") == 1
    assert failed_ids(response) == {record["messageId"]}
    assert pipeline.status("reset:1:u1") == "IN_FLIGHT"


def test_a_default_sdk_client_would_have_sent_it_again(pipeline, ses_faults):
    # The control: proves the proxy sees retries, so the test above would catch one.
    ses_faults.script(Fault.ACCEPT_THEN_HANG, Fault.ACCEPT_THEN_HANG, Fault.ACCEPT_THEN_HANG)
    ses = boto3.client("sesv2", endpoint_url=ses_faults.endpoint, config=Config(read_timeout=0.5))
    with contextlib.suppress(ReadTimeoutError):
        ses.send_email(
            FromEmailAddress="receipts@example.com",
            Destination={"ToAddresses": ["ada@example.org"]},
            Content={"Simple": {"Subject": {"Data": "Receipt control"}, "Body": {"Text": {"Data": "x"}}}},
        )
    assert ses_faults.send_requests > 1
    assert pipeline.emails_for("control") == ses_faults.send_requests  # every retry was another email
