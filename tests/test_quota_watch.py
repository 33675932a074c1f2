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
from sendonce_local.emulator.proxy import Behaviour, ForwardingProxy, ProxiedRequest, Reply
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


def test_the_quota_watch_deploys_to_the_emulator_with_its_schedule(aws):
    """Its resources as synthesized (the code inlined: the emulator has no asset bucket), deployed by the emulator's
    CloudFormation: the schedule, its target and Lambda's permission for EventBridge."""
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    stack = cdk.Stack(cdk.App(), "Watch")
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", ses_events=False, alarms=False)
    template = Template.from_stack(stack).to_json()
    resources = {name: resource for name, resource in template["Resources"].items() if "QuotaWatch" in name}
    for resource in resources.values():
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"]["Code"] = {"ZipFile": "def handler(event, context):\n    return None\n"}
    assert {r["Type"] for r in resources.values()} >= {"AWS::Events::Rule", "AWS::Lambda::Permission",
                                                        "AWS::Lambda::Function", "AWS::IAM::Role"}
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName="Watch", TemplateBody=json.dumps({"Resources": resources}),
                                Capabilities=["CAPABILITY_IAM"])
    status = cloudformation.describe_stacks(StackName="Watch")["Stacks"][0]["StackStatus"]
    assert status == "CREATE_COMPLETE", status
    [rule] = [r for r in boto3.client("events").list_rules()["Rules"] if r.get("ScheduleExpression")]
    assert rule["ScheduleExpression"] == "rate(5 minutes)"
    [target] = boto3.client("events").list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert ":function:" in target["Arn"]
