"""Secure and observable by default: cdk-nag and cfn-lint clean, least privilege, metrics, alarms, logs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from cfnlint.api import ManualArgs, lint
from construct_support import evidence_statements, only, policy_statements, statement_actions

from sendonce_constructs import SendOnceEmailQueue
from sendonce_contract.deploy_config import Env

ROOT = Path(__file__).resolve().parents[1]
# The only actions granted on "*": AWS has no resource-level permission for them.
NO_RESOURCE_LEVEL_PERMISSION = {"dynamodb:ListStreams", "xray:PutTraceSegments", "xray:PutTelemetryRecords",
                                "ses:GetAccount"}


def example_stack() -> cdk.Stack:
    spec = importlib.util.spec_from_file_location("example_app", ROOT / "examples" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_app().node.find_child("SendOnceExample")


def everything_on_stack() -> cdk.Stack:
    app = cdk.App()
    stack = cdk.Stack(app, "EverythingOn")
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    SendOnceEmailQueue(
        stack, "Receipts", sender="example.com", from_addresses=["receipts@example.com"],
        configuration_set="transactional", template_names=["receipt"], allow_raw_messages=True,
        tracing=lambda_.Tracing.ACTIVE, fifo=True, encryption_key=key, deletion_protection=True,
        alarm_topic=sns.Topic(stack, "Alarms", enforce_ssl=True, master_key=key), dashboard=True,
        max_concurrency=4, outbox=True, key_privacy=True, allowed_recipients=["simulator.amazonses.com"],
        urgent_lane=True, send_rate=8,
    )
    return stack


STACKS = {"example": example_stack, "everything on": everything_on_stack}


@pytest.fixture(scope="module", params=list(STACKS))
def stack(request) -> cdk.Stack:
    return STACKS[request.param]()


@pytest.mark.parametrize("pack", [AwsSolutionsChecks, ServerlessChecks], ids=lambda p: p.__name__)
def test_cdk_nag_finds_nothing_unacknowledged(stack, pack):
    report = pack(stack.node.root).validate_scope(stack)
    assert report.violations == [] and report.success


def test_cfn_lint_finds_no_errors_or_warnings(stack):
    template = json.dumps(Template.from_stack(stack).to_json())
    matches = lint(template, config=ManualArgs(regions=["us-east-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches] == []


def test_consumer_role_has_no_managed_policy_and_no_wildcard_resource():
    template = Template.from_stack(example_stack())
    roles = template.find_resources("AWS::IAM::Role")
    consumer = [r for name, r in roles.items() if name.startswith("ReceiptsConsumerRole")]
    assert len(consumer) == 1 and "ManagedPolicyArns" not in consumer[0]["Properties"]
    for statement in policy_statements(template):
        if statement["Resource"] == "*":
            assert set(statement_actions(statement)) <= NO_RESOURCE_LEVEL_PERMISSION, statement


def test_consumer_writes_logs_only_to_its_own_log_group():
    template = Template.from_stack(example_stack())
    groups = sorted(s["Resource"]["Fn::GetAtt"][0] for s in policy_statements(template)
                    if "logs:PutLogEvents" in s["Action"])
    # The example has urgent_lane: each lane's consumer writes to its own group.
    assert [g[: -len("ABCDEF12")] for g in groups] == ["ReceiptsConsumerLogs", "ReceiptsOutboxRelayLogs",
                                                        "ReceiptsUrgentConsumerLogs"]
    recorder_groups = [s["Resource"]["Fn::GetAtt"][0] for s in evidence_statements(template)
                       if "logs:PutLogEvents" in s["Action"]]
    assert [g[: -len("ABCDEF12")] for g in recorder_groups] == ["ReceiptsSesEvidenceRecorderLogs"]


def test_consumer_logs_json_one_line_per_record_and_traces_on_request():
    lanes = Template.from_stack(example_stack()).find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "sendonce_runtime.handler.handler"}})
    assert len(lanes) == 2  # the example has urgent_lane: both lanes' consumers, each with the defaults
    for default in (function["Properties"] for function in lanes.values()):
        assert default["LoggingConfig"]["LogFormat"] == "JSON"
        assert default["LoggingConfig"]["ApplicationLogLevel"] == "INFO"
        assert "TracingConfig" not in default
    # Both lanes' consumers (the stack has urgent_lane), each traced.
    traced = Template.from_stack(everything_on_stack()).find_resources(
        "AWS::Lambda::Function", {"Properties": {"Handler": "sendonce_runtime.handler.handler"}})
    assert len(traced) == 2
    assert all(f["Properties"]["TracingConfig"] == {"Mode": "Active"} for f in traced.values())


def test_customer_key_encrypts_queues_and_table():
    template = Template.from_stack(everything_on_stack())
    for queue in template.find_resources("AWS::SQS::Queue").values():
        assert "KmsMasterKeyId" in queue["Properties"]
    for table in template.find_resources("AWS::DynamoDB::Table").values():  # the dedupe table and the outbox
        sse = table["Properties"]["SSESpecification"]
        assert sse["SSEEnabled"] is True and "KMSMasterKeyId" in sse


def test_default_alarms_watch_the_dlqs_the_oldest_message_unknown_records_doubles_and_errors():
    template = Template.from_stack(example_stack())
    alarms = {name: a["Properties"] for name, a in template.find_resources("AWS::CloudWatch::Alarm").items()}
    by_metric = {a.get("MetricName"): a for name, a in alarms.items() if "Urgent" not in name}
    urgent = {a.get("MetricName"): a for name, a in alarms.items() if "Urgent" in name}
    assert set(urgent) == {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage", "Errors"}
    assert urgent["ApproximateAgeOfOldestMessage"]["Threshold"] == 60  # the urgent lane's tighter default
    assert set(by_metric) == {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage",
                              "UnknownRecords", "DoubleSends", "QuotaExhausted", "SesStopped", "ContractTooNew",
                              "Errors", "QuotaUsedPercent", "SuspectedDoubles",  # the example's guard holds them
                              "ScheduledLeft",  # the waiting room's (and its watch's Errors)
                              None}  # None: metric math (DynamoDB's trouble, the rates)
    # both dead-letter queues, the outcome publisher's failures, DynamoDB's trouble, the bounce and complaint rates,
    # the urgent lane's own three (its DLQ, its oldest message, its function's errors), and the waiting room's two
    assert len(alarms) == 20
    assert by_metric["QuotaUsedPercent"]["Threshold"] == 80
    assert by_metric["QuotaUsedPercent"]["Statistic"] == "Maximum"
    [ledger] = [a["Metrics"] for name, a in alarms.items() if "LedgerTrouble" in name]
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in ledger if "MetricStat" in m} == {
        "LedgerThrottles", "LedgerErrors"}
    assert by_metric["DoubleSends"]["Threshold"] == 1
    assert by_metric["ApproximateAgeOfOldestMessage"]["Threshold"] == 900
    assert by_metric["UnknownRecords"]["Namespace"] == "sendonce"
    assert by_metric["UnknownRecords"]["Dimensions"] == [{"Name": "Pipeline", "Value": "SendOnceExample/Receipts"}]
    assert all(a["TreatMissingData"] == "notBreaching" and "AlarmActions" not in a for a in alarms.values())


def test_bounce_and_complaint_rates_alarm_below_ses_review_thresholds_from_the_recorders_counts():
    template = Template.from_stack(example_stack())
    alarms = {name: a["Properties"] for name, a in template.find_resources("AWS::CloudWatch::Alarm").items()}
    rates = {name.split("Receipts")[1].split("Rate")[0]: alarm for name, alarm in alarms.items() if "Rate" in name}
    assert set(rates) == {"Bounce", "Complaint"}
    assert rates["Bounce"]["Threshold"] == 2.0 < 5.0  # SES reviews an account at 5% bounces
    assert rates["Complaint"]["Threshold"] == 0.05 < 0.1  # ... and at 0.1% complaints
    for events, alarm in (("Bounces", rates["Bounce"]), ("Complaints", rates["Complaint"])):
        expression = next(m for m in alarm["Metrics"] if "Expression" in m)
        assert expression["Expression"] == f"IF(sends >= 200, 100 * {events.lower()} / sends, 0)"
        stats = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
        assert {s["Metric"]["MetricName"] for s in stats.values()} == {events, "SesSends"}
        assert all(s["Period"] == 6 * 3600 and s["Stat"] == "Sum" for s in stats.values())
        assert all(s["Metric"]["Dimensions"] == [{"Name": "Pipeline", "Value": "SendOnceExample/Receipts"}]
                   for s in stats.values())
    # The recorder counts what the rates divide: one name each, from the contract's one table of event types.
    from sendonce_contract.schema import SES_EVENTS_BY_NAME

    assert {SES_EVENTS_BY_NAME[name].metric for name in ("Bounce", "Complaint", "Send")} == {
        "Bounces", "Complaints", "SesSends"}


def test_the_dashboard_draws_the_reputation_rates():
    stack = cdk.Stack(cdk.App(), "Board")
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", dashboard=True)
    body = json.dumps(only(Template.from_stack(stack), "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"])
    assert "Reputation" in body and "100 * bounces / sends" in body and "100 * complaints / sends" in body
    with pytest.raises(ValueError, match="needs ses_events=True"):
        SendOnceEmailQueue(stack, "NoEvents", sender="example.com", ses_events=False).metric_bounce_rate()


def test_alarm_topic_receives_every_alarm_and_thresholds_are_props():
    stack = cdk.Stack(cdk.App(), "Topic")
    topic = sns.Topic(stack, "Pager")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", alarm_topic=topic,
                                  oldest_message_alarm_threshold=cdk.Duration.minutes(5))
    template = Template.from_stack(stack)
    alarms = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]
    assert len(alarms) == 16 == len(pipeline.alarms)
    assert all(a["AlarmActions"] == [{"Ref": stack.get_logical_id(topic.node.default_child)}] for a in alarms)
    assert {a["Threshold"] for a in alarms if a.get("MetricName") == "ApproximateAgeOfOldestMessage"} == {300}


def test_alarms_can_be_turned_off_and_a_dashboard_on():
    stack = cdk.Stack(cdk.App(), "Quiet")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", alarms=False, dashboard=True)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)
    body = json.dumps(only(template, "AWS::CloudWatch::Dashboard")["Properties"]["DashboardBody"])
    assert "EmailsSent" in body and "UnknownRecords" in body and "ApproximateAgeOfOldestMessage" in body
    assert "LedgerThrottles" in body and "LedgerErrors" in body and "QuotaUsedPercent" in body
    assert pipeline.dashboard is not None and pipeline.alarms == {}


def test_metric_helpers_name_the_consumers_emf_metrics():
    stack = cdk.Stack(cdk.App(), "Metrics")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", alarms=False)
    helpers = {
        "EmailsSent": pipeline.metric_emails_sent(), "DuplicatesSkipped": pipeline.metric_duplicates_skipped(),
        "InFlightRetries": pipeline.metric_in_flight_retries(), "UnknownRecords": pipeline.metric_unknown_records(),
        "AmbiguousSends": pipeline.metric_ambiguous_sends(), "KeyConflicts": pipeline.metric_key_conflicts(),
        "PoisonMessages": pipeline.metric_poison_messages(), "SesThrottles": pipeline.metric_ses_throttles(),
        "SesRefusals": pipeline.metric_ses_refusals(), "RecordLatency": pipeline.metric_record_latency(),
        "RecipientsNotAllowed": pipeline.metric_recipients_not_allowed(),
        "LedgerThrottles": pipeline.metric_ledger_throttles(), "LedgerErrors": pipeline.metric_ledger_errors(),
    }
    from sendonce_runtime.metrics import ALL_COUNTS

    for name, metric in helpers.items():
        assert (metric.namespace, metric.metric_name) == ("sendonce", name)
        assert metric.dimensions == {"Pipeline": "Metrics/Receipts"}
        assert name in ALL_COUNTS or name == "RecordLatency"
    assert pipeline.metric_record_latency().statistic == "p90"
    assert pipeline.metric_emails_sent(period=cdk.Duration.minutes(1)).period.to_seconds() == 60
    assert pipeline.metric_dead_letter_queue_depth().metric_name == "ApproximateNumberOfMessagesVisible"
    assert pipeline.metric_approximate_age_of_oldest_message().metric_name == "ApproximateAgeOfOldestMessage"


def test_the_recorder_may_update_ledger_records_send_to_its_dlq_and_log_nothing_more():
    template = Template.from_stack(example_stack())
    actions = {}
    for statement in evidence_statements(template):
        for action in statement_actions(statement):
            actions.setdefault(action, []).append(json.dumps(statement["Resource"]))
    assert set(actions) == {"dynamodb:UpdateItem", "sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
                            "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage",
                            "logs:CreateLogStream", "logs:PutLogEvents"}
    assert all("DedupeTable" in r for r in actions["dynamodb:UpdateItem"])
    assert all("SesEvidenceDeadLetterQueue" in r for r in actions["sqs:SendMessage"])
    assert all("SesEvidenceQueue" in r for r in actions["sqs:ReceiveMessage"])


def test_the_quota_watch_reads_ses_quota_on_a_schedule_with_get_account_only():
    template = Template.from_stack(example_stack())
    [rule] = template.find_resources("AWS::Events::Rule", {"Properties": {"ScheduleExpression": "rate(5 minutes)"}
                                                           }).values()
    functions = template.find_resources("AWS::Lambda::Function")
    [watch] = [f["Properties"] for f in functions.values()
               if f["Properties"]["Handler"] == "sendonce_runtime.quota_watch.handler"]
    assert watch["Environment"]["Variables"] == {Env.PIPELINE_NAME: "SendOnceExample/Receipts"}
    assert rule["Properties"]["Targets"][0]["RetryPolicy"] == {"MaximumRetryAttempts": 0}
    role_id = watch["Role"]["Fn::GetAtt"][0]
    statements = [s for p in template.find_resources("AWS::IAM::Policy").values()
                  if {"Ref": role_id} in p["Properties"]["Roles"]
                  for s in p["Properties"]["PolicyDocument"]["Statement"]]
    assert [s["Action"] for s in statements if s["Resource"] == "*"] == ["ses:GetAccount"]
    # A paced consumer reads SES's rate itself, once a minute (test_a_paced_consumer_may_read_ses_s_own_rate_...).


def test_the_quota_alarm_threshold_is_a_prop_and_the_watch_can_be_turned_off():
    stack = cdk.Stack(cdk.App(), "Quota")
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", quota_alarm_threshold=50)
    alarms = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")
    assert {a["Properties"]["Threshold"] for a in alarms.values()
            if a["Properties"].get("MetricName") == "QuotaUsedPercent"} == {50}
    quiet = cdk.Stack(cdk.App(), "NoWatch")
    pipeline = SendOnceEmailQueue(quiet, "Receipts", sender="example.com", quota_watch=False)
    template = Template.from_stack(quiet)
    assert not template.find_resources("AWS::Events::Rule", {"Properties": {"ScheduleExpression": "rate(5 minutes)"}})
    assert pipeline.quota_watch is None and "QuotaNearlyUsed" not in pipeline.alarms


def test_a_paced_consumer_may_read_ses_s_own_rate_and_knows_the_pipeline_s_planned_rate():
    """Pacing plans under SES's MaxSendRate (GetAccount): a paced pipeline's consumer gets ses:GetAccount and the
    pipeline's whole planned rate; an unpaced one neither."""
    for send_rate, planned in ((14.0, "14"), (None, None)):
        stack = cdk.Stack(cdk.App(), "Paced")
        props = {"send_rate": send_rate, "max_concurrency": 14} if send_rate else {}
        SendOnceEmailQueue(stack, "Receipts", sender="example.com", quota_watch=False, **props)
        template = Template.from_stack(stack)
        consumer = only(template, "AWS::Lambda::Function", Properties={"Handler": "sendonce_runtime.handler.handler"})
        assert consumer["Properties"]["Environment"]["Variables"].get(Env.PLANNED_SEND_RATE) == planned
        reads = [s for s in policy_statements(template) if "ses:GetAccount" in statement_actions(s)]
        assert [s["Resource"] for s in reads] == (["*"] if send_rate else [])
