"""The quota watch reads SES's 24-hour quota on a schedule and publishes how much of it is used; the consumer
never reads it on the send path. moto's SESv2 has no GetAccount: a proxy plays SES's answer, in SESv2's
documented shape (``SendQuota``: ``Max24HourSend``, ``MaxSendRate``, ``SentLast24Hours``)."""

from __future__ import annotations

import io
import json
import re

import boto3
import pytest

from sendonce_constructs import SendOnceConfigurationError, SendOnceEmailQueue
from sendonce_constructs.local.proxy import Behaviour, ForwardingProxy, ProxiedRequest, Reply
from sendonce_runtime.quota_watch import used_percent, watch

ACCOUNT_PATH = "/v2/email/account"


def ses_account(send_quota: dict) -> Behaviour:
    def answer(request: ProxiedRequest, forward) -> Reply | None:
        if request.path.startswith(ACCOUNT_PATH):
            body = {"SendQuota": send_quota, "SendingEnabled": True, "ProductionAccessEnabled": True}
            return Reply(200, [("Content-Type", "application/json")], json.dumps(body).encode())
        return forward()

    return answer


def test_the_quota_watch_publishes_the_share_of_the_daily_quota_used_as_a_metric(aws):
    proxy = ForwardingProxy(aws.endpoint, ses_account(
        {"Max24HourSend": 50_000.0, "MaxSendRate": 14.0, "SentLast24Hours": 42_500.0})).start()
    try:
        out = io.StringIO()
        watch(boto3.client("sesv2", endpoint_url=proxy.endpoint), "Shop/Receipts", out)
    finally:
        proxy.stop()
    line = json.loads(out.getvalue())
    assert line["QuotaUsedPercent"] == 85.0 and line["maxSendRate"] == 14.0
    [directive] = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == "sendonce" and directive["Dimensions"] == [["Pipeline"]]
    assert directive["Metrics"] == [{"Name": "QuotaUsedPercent", "Unit": "Percent"}]
    assert line["Pipeline"] == "Shop/Receipts"


@pytest.mark.parametrize(("quota", "percent"), [
    ({"Max24HourSend": 200.0, "SentLast24Hours": 200.0}, 100.0),  # the sandbox's quota, used up
    ({"Max24HourSend": -1.0, "SentLast24Hours": 10.0}, 0.0),  # unlimited
    ({}, 0.0),
])
def test_used_percent(quota, percent):
    assert used_percent(quota) == percent


@pytest.mark.parametrize("threshold", [0, -5, 100.5])
def test_a_quota_alarm_threshold_outside_a_percentage_fails_synth_with_the_fix(threshold):
    import aws_cdk as cdk

    with pytest.raises(SendOnceConfigurationError, match=re.escape(f"quota_alarm_threshold ({threshold:g}) must be")):
        SendOnceEmailQueue(cdk.Stack(cdk.App(), "Bad"), "Receipts", sender="example.com",
                           quota_alarm_threshold=threshold)
