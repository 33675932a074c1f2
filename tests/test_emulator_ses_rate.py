"""The emulator's SES can be given a sending rate, refusing the excess with SES's own throttling error."""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from sendonce_local.emulator.ses_limits import SES_RATE


def send(ses, recipients: int = 1) -> str:
    to = [f"ada{n}@example.org" for n in range(recipients)]
    try:
        ses.send_email(FromEmailAddress="receipts@example.com", Destination={"ToAddresses": to},
                       Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}})
    except ClientError as error:
        return f"{error.response['Error']['Code']} {error.response['ResponseMetadata']['HTTPStatusCode']}"
    return "accepted"


def test_a_limited_ses_accepts_a_seconds_worth_then_throttles_like_ses(aws):
    ses = boto3.client("sesv2", config=Config(retries={"total_max_attempts": 1}))
    ses.create_email_identity(EmailIdentity="example.com")
    SES_RATE.limit(3)
    try:
        answers = [send(ses) for _ in range(5)]
    finally:
        SES_RATE.limit(None)
    assert answers == ["accepted"] * 3 + ["TooManyRequestsException 429"] * 2
    assert len(aws.sent_emails()) == 3  # a throttled send never reaches SES's mailbox


@pytest.mark.parametrize("rate", [None])
def test_without_a_limit_every_send_is_accepted(aws, rate):
    ses = boto3.client("sesv2", config=Config(retries={"total_max_attempts": 1}))
    ses.create_email_identity(EmailIdentity="example.com")
    SES_RATE.limit(rate)
    assert [send(ses) for _ in range(20)] == ["accepted"] * 20


def test_a_limited_ses_counts_recipients_not_emails(aws):
    ses = boto3.client("sesv2", config=Config(retries={"total_max_attempts": 1}))
    ses.create_email_identity(EmailIdentity="example.com")
    SES_RATE.limit(4)
    try:
        answers = [send(ses, recipients=3), send(ses, recipients=2)]
    finally:
        SES_RATE.limit(None)
    assert answers == ["accepted", "TooManyRequestsException 429"]  # three of four tokens spent, two needed


def test_an_email_with_more_recipients_than_the_rate_takes_a_full_bucket_and_leaves_it_in_debt():
    from sendonce_local.emulator.ses_limits import SesRateLimit

    limit = SesRateLimit()
    limit.limit(4)
    assert [limit.admit(10), limit.admit(1)] == [True, False]
