"""`sendonce-local run`: play the SQS event source for a stack deployed to the emulator, code from cdk.out."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import boto3

from sendonce_contract.deploy_config import Env
from sendonce_local.cli import main as local_cli

TEMPLATE = {"Resources": {
    "Role": {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": {
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                "Principal": {"Service": "lambda.amazonaws.com"}}]}}},
    "Jobs": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 6}},
    "Fn": {"Type": "AWS::Lambda::Function", "Properties": {
        "Handler": "tiny.handler", "Runtime": "python3.12", "Timeout": 3, "Role": {"Fn::GetAtt": ["Role", "Arn"]},
        "Code": {"ZipFile": "def handler(event, context): pass"}, "Environment": {"Variables": {}}}},
    "Map": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {
        "FunctionName": {"Ref": "Fn"}, "EventSourceArn": {"Fn::GetAtt": ["Jobs", "Arn"]}, "BatchSize": 5,
        "FunctionResponseTypes": ["ReportBatchItemFailures"]}},
}}
HANDLER = '''
import os

def handler(event, context):
    with open(os.environ["TINY_LOG"], "a") as log:
        for record in event["Records"]:
            log.write(record["body"] + "\\n")
    return {"batchItemFailures": []}
'''


def test_run_plays_the_event_source_of_a_deployed_stack_until_the_queue_is_drained(aws, tmp_path: Path, capsys):
    log = tmp_path / "handled.txt"
    deployed = copy.deepcopy(TEMPLATE)
    deployed["Resources"]["Fn"]["Properties"]["Environment"]["Variables"]["TINY_LOG"] = str(log)
    boto3.client("cloudformation").create_stack(StackName="Tiny", TemplateBody=json.dumps(deployed))
    # The cloud assembly as `cdk synth` leaves it: the template names the code asset, the asset is a folder.
    cdk_out = tmp_path / "cdk.out"
    (cdk_out / "asset.0123abcd").mkdir(parents=True)
    (cdk_out / "asset.0123abcd" / "tiny.py").write_text(HANDLER)
    synthesized = copy.deepcopy(deployed)
    synthesized["Resources"]["Fn"]["Properties"]["Code"] = {"S3Bucket": "assets", "S3Key": "0123abcd.zip"}
    (cdk_out / "Tiny.template.json").write_text(json.dumps(synthesized))
    sqs = boto3.client("sqs")
    queue_url = next(url for url in sqs.list_queues()["QueueUrls"] if "Jobs" in url)
    for body in ("one", "two", "three"):
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)

    assert local_cli(["run", "--stack", "Tiny", "--cdk-out", str(cdk_out), "--until-drained"]) == 0
    assert sorted(log.read_text().split()) == ["one", "three", "two"]
    assert "polling" in capsys.readouterr().out


def test_a_configuration_set_the_emulator_skipped_is_made_and_named_in_the_functions_environment(aws, tmp_path):
    from sendonce_local.lambda_service.stack_gaps import make_skipped_configuration_sets

    template = copy.deepcopy(TEMPLATE)
    template["Resources"]["Set"] = {"Type": "AWS::SES::ConfigurationSet"}
    template["Resources"]["Fn"]["Properties"]["Environment"]["Variables"][Env.CONFIGURATION_SET] = {
        "Ref": "Set"}
    boto3.client("cloudformation").create_stack(StackName="WithSet", TemplateBody=json.dumps(template))
    (tmp_path / "WithSet.template.json").write_text(json.dumps(template))

    assert make_skipped_configuration_sets("WithSet", tmp_path) == ["WithSet-Set"]
    function = next(f for f in boto3.client("lambda").list_functions()["Functions"] if "Fn" in f["FunctionName"])
    assert function["Environment"]["Variables"][Env.CONFIGURATION_SET] == "WithSet-Set"
    assert boto3.client("sesv2").get_configuration_set(ConfigurationSetName="WithSet-Set")


def test_each_record_is_one_readable_line_and_the_summary_counts_by_outcome_and_reason():
    from sendonce_local.cli.run_output import Summary, _worth_a_line, readable

    lines = [
        {"logger": "sendonce", "outcome": "sent", "dedupeKey": "k1", "sesMessageId": "m1"},
        {"logger": "sendonce", "outcome": "duplicate", "dedupeKey": "k1", "reason": "already SENT"},
        {"logger": "sendonce", "outcome": "refused", "dedupeKey": "k2", "reason": "Email address is not verified."},
        {"logger": "sendonce", "outcome": "invalid_message", "messageId": "x", "reason": "not JSON"},
        {"logger": "sendonce.evidence", "outcome": "recorded", "eventType": "Send", "dedupeKey": "k1"},
        {"logger": "sendonce", "outcome": "recipient_not_allowed", "dedupeKey": "k3", "reason": "eve@x not in ..."},
        {"logger": "sendonce", "outcome": "cancelled", "dedupeKey": "k4"},
        {"logger": "sendonce", "outcome": "scheduled", "dedupeKey": "k5"},
        {"logger": "sendonce", "outcome": "throttled", "dedupeKey": "k6"},
    ]
    summary = Summary()
    for line in lines:
        summary.add(line)
    assert "-> DLQ (ses-refused)" in readable(lines[2]) and "\n" not in readable(lines[2])
    assert "-> DLQ (recipient-not-allowed)" in readable(lines[5])
    assert "SES Send recorded" in readable(lines[4])
    publisher = {"logger": "sendonce.outcomes", "outcome": "published", "records": 2, "published": 2, "failed": 0,
                 "transitions": ["delivered", "sent"]}
    assert readable(publisher).endswith("2 published, 0 failed: delivered, sent")
    # A person reads outcomes: not the EMF lines, nor a publisher's batch that had no transition to publish.
    idle = {**publisher, "published": 0, "transitions": []}
    assert [_worth_a_line(line) for line in (lines[0], publisher, idle, {"logger": "sendonce", "_aws": {}})] == [
        True, True, False, False]
    text = summary.text(3)
    assert ("sent 1, duplicates 1, refused by SES 1, dead-lettered 3 (invalid-message 1, recipient-not-allowed 1, "
            "ses-refused 1)") in text
    # Only the throttled one handed back.
    assert "cancelled 1, expired 0, scheduled for later 1, handed back to the queue 1;" in text
    assert "SES events recorded 1 (Send 1)" in text


def test_the_sender_identities_are_read_from_the_stack_policies():
    from sendonce_local.cli.run import sender_identities

    arn = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ses:us-east-1:123456789012:identity/example.com"]]}
    template = {"Resources": {"Policy": {"Type": "AWS::IAM::Policy", "Properties": {"PolicyDocument": {
        "Statement": [{"Action": "ses:SendEmail", "Resource": [arn, "arn:aws:ses:us-east-1:1:configuration-set/x"]},
                      {"Action": ["sqs:SendMessage"], "Resource": "*"}]}}}}}
    assert sender_identities(template) == ["example.com"]


def test_a_request_the_emulator_failed_is_one_line_unless_verbose():
    import logging
    import sys

    from sendonce_local.emulator.log import OneLine

    try:
        raise ValueError("list.remove(x): x not in list")
    except ValueError:
        record = logging.LogRecord("werkzeug", logging.ERROR, __file__, 1, "Error on request:\nmore", None,
                                   sys.exc_info())
    assert len(OneLine(verbose=False).format(record).splitlines()) == 1
    assert "ValueError: list.remove(x)" in OneLine(verbose=False).format(record)
    assert "Traceback" in OneLine(verbose=True).format(record)
    # How moto's server logs it: the traceback as the message's text, with no exception attached.
    text = logging.LogRecord("werkzeug", logging.ERROR, __file__, 1, "Error on request:\nTraceback (most recent call "
                             "last):\n  File \"x.py\", line 1, in f\nKeyError: 'ChangeSetName'", None, None)
    assert OneLine(verbose=False).format(text).endswith("emulator: Error on request: KeyError: 'ChangeSetName'")
    assert "Traceback" in OneLine(verbose=True).format(text)


def test_stream_positions_outlive_the_run_per_endpoint_and_stream(tmp_path: Path, monkeypatch):
    from sendonce_local.lambda_service.checkpoints import StreamCheckpoints, default_path

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_path() == tmp_path / "state" / "sendonce" / "stream-checkpoints.json"
    StreamCheckpoints("http://localhost:1").put("arn:stream/1", "shard-0", "42")
    again = StreamCheckpoints("http://localhost:1")  # the next run
    assert again.get("arn:stream/1", "shard-0") == "42"
    assert again.get("arn:stream/2", "shard-0") is None  # a new emulator's stream starts fresh
    assert StreamCheckpoints("http://localhost:2").get("arn:stream/1", "shard-0") is None


def test_run_sees_each_completed_deploy_and_a_rolled_back_one_reloads_nothing(aws, tmp_path: Path):
    from typing import cast

    from sendonce_local.cli.run import RunOptions, _follow_deploys
    from sendonce_local.lambda_service.stack_runners import StackRunners
    from sendonce_local.lambda_service.stack_watch import StackWatch

    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName="Tiny", TemplateBody=json.dumps(TEMPLATE))
    watch = StackWatch("Tiny")
    assert watch.completed() is None

    def deploy(template: dict[str, object]) -> None:  # as `cdk deploy` does: a change set, executed
        cloudformation.create_change_set(StackName="Tiny", ChangeSetName="cdk-deploy-change-set",
                                         TemplateBody=json.dumps(template), ChangeSetType="UPDATE")
        cloudformation.execute_change_set(StackName="Tiny", ChangeSetName="cdk-deploy-change-set")

    class Untouched:
        def reload(self) -> str:
            raise AssertionError("a deploy that rolled back changed nothing to reload")

    broken = copy.deepcopy(TEMPLATE)
    broken["Resources"]["Broken"] = {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "not a valid name!"}}
    deploy(broken)
    said: list[str] = []
    _follow_deploys(cast(StackRunners, Untouched()), watch, RunOptions("Tiny", tmp_path), said.append)
    assert said == ["a deploy of Tiny ended in UPDATE_ROLLBACK_COMPLETE: the functions as deployed before keep "
                    "running"]
    changed = copy.deepcopy(TEMPLATE)
    changed["Resources"]["Jobs"]["Properties"]["VisibilityTimeout"] = 7
    deploy(changed)
    assert watch.completed() == "UPDATE_COMPLETE"
    assert watch.completed() is None  # each deploy once


def test_a_stream_batch_cut_short_by_the_end_of_the_run_is_read_again_from_its_first_record_not_done(aws, tmp_path):
    from sendonce_local.lambda_service.instances import Ending, FunctionSpec, Invocation
    from sendonce_local.lambda_service.stream_source import StreamEventSourceRunner, StreamSourceSpec

    runner = StreamEventSourceRunner(FunctionSpec("relay", "relay.handler", tmp_path), StreamSourceSpec("arn:s"), {})
    records = [{"eventID": n, "eventName": "INSERT", "dynamodb": {"SequenceNumber": n}} for n in ("10", "20", "30")]
    answers = iter([{"batchItemFailures": [{"itemIdentifier": "20"}]}, {}])

    def invoke(event: dict, fault: object = None) -> Invocation:
        runner._stop.set()  # the run ends while the function works on the batch
        return Invocation(Ending.RETURNED, next(answers))

    runner._instance.invoke = invoke  # type: ignore[method-assign]
    assert runner._deliver(records) == "10"  # 10 is done; 20 and 30 are read again by the next run
    assert runner._deliver(records) is None  # stopped before the function took any of it
    runner._stop.clear()
    assert runner._deliver(records) == "30"
