"""key_privacy: outside the job body a key is only its keyed digest (the ledger, SES's tags and events, the logs, the
DLQ's attributes), and the operator still types the clear key. Emails are counted in the emulator's SES."""

from __future__ import annotations

import json
import logging

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record

from sendonce_constructs import SendOnceEmailQueue
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import Env
from sendonce_contract.key_digest import key_digest
from sendonce_local.emulator.ses_publisher import SEND_LOG
from sendonce_ops.cli import main as sendonce

# The playbook's own example: the key carries an address.
KEY = "order-1042:shipped:ada@example.org"
SECRET = "k" * 32 + "4" * 32
ALL = float("inf")


@pytest.fixture
def secret_arn(aws) -> str:
    return boto3.client("secretsmanager").create_secret(Name="sendonce-keys", SecretString=SECRET)["ARN"]


def digest(key: str) -> str:
    return key_digest(SECRET.encode(), key)


def private(pipeline, clock, secret_arn, **overrides):
    return pipeline.consumer(clock, key_secret_id=secret_arn, **pipeline.evidence_settings(**overrides))


def everything_written(pipeline, consumer) -> str:
    """What left the job body: ledger items, DLQ attributes, SES's tags, the consumer's and the recorder's logs."""
    items = boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"]
    dead = [m.get("MessageAttributes", {}) for m in pipeline.dead_letters()]
    tags = [send.tags for send in SEND_LOG.since(0)]
    return json.dumps([items, dead, tags, consumer.log._stream.getvalue(),
                       pipeline.recorder_log.getvalue() if pipeline.recorder_log else ""], default=str)


def test_a_private_key_is_sent_once_and_only_its_digest_leaves_the_job_body(pipeline, secret_arn, caplog):
    clock = FakeClock()
    SEND_LOG.clear()
    ses_events = pipeline.ses_events(clock)
    consumer = private(pipeline, clock, secret_arn)
    caplog.set_level(logging.DEBUG, logger="sendonce")
    record = sqs_record(job(KEY, to=["Ada <ada@example.org>"]))
    consumer.handle(event(record, sqs_record(job(KEY, to=["Ada <ada@example.org>"]))), FakeContext(clock))
    consumer.handle(event(record), FakeContext(clock))  # delivered again
    ses_events.pump(ALL)

    assert pipeline.emails_for(KEY) == 1
    assert pipeline.ledger_item(KEY) is None
    item = pipeline.ledger_item(digest(KEY))
    assert item["status"]["S"] == "SENT" and item["sesMessageIds"]["SS"]  # the recorder found it by the digest
    [send] = SEND_LOG.since(0)
    assert ("sendonce-key", digest(KEY)) in send.tags  # one tag: a digest needs no chunks
    assert not any(name.startswith("sendonce-k0") for name, _ in send.tags)
    written = everything_written(pipeline, consumer) + caplog.text
    assert "order-1042" not in written and "ada@example.org" not in written
    assert SECRET not in written and SECRET not in repr(consumer.processor.parse.private_keys._digester())
    assert digest(KEY) in consumer.log._stream.getvalue()


def test_a_dead_letter_carries_the_digest_and_a_reason_without_the_key(pipeline, secret_arn):
    consumer = private(pipeline, FakeClock(), secret_arn)
    broken = job(KEY, subject="")  # breaks the contract after the key was read
    bad_key = job(" " + KEY)  # the key itself breaks it: its text is quoted in the reason, then taken out
    consumer.handle(event(sqs_record(broken), sqs_record(bad_key)), FakeContext(FakeClock()))
    dead = {m["MessageAttributes"]["sendonce.reason"]["StringValue"]: m["MessageAttributes"]
            for m in pipeline.dead_letters()}
    assert len(dead) == 2 and "order-1042" not in json.dumps(list(dead.values()))
    keys = [attributes.get("sendonce.dedupeKey", {}).get("StringValue") for attributes in dead.values()]
    assert sorted(keys, key=str) == sorted([digest(KEY), None], key=str)
    assert any("dedupeKey <dedupeKey> starts or ends with white space" in reason for reason in dead)
    assert pipeline.emails_for(KEY) == 0


def test_the_operator_redrives_one_private_keys_dead_letters_by_its_clear_text(pipeline, secret_arn, capsys):
    consumer = private(pipeline, FakeClock(), secret_arn)
    other = "order-1043:shipped:bob@example.org"
    consumer.handle(event(sqs_record(job(KEY, subject="")), sqs_record(job(other, subject=""))),
                    FakeContext(FakeClock()))
    jobs = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    where = ["--queue", jobs, "--dlq", pipeline.dead_letter_queue_url, "--key-secret", secret_arn,
             "--dedupe-ttl", "604800"]
    assert sendonce([*where, "dlq", "redrive", "--key", KEY]) == 0  # the DLQ knows it as its digest only
    assert "moved 1 messages back to the job queue; 1 left in the DLQ" in capsys.readouterr().out
    [moved] = boto3.client("sqs").receive_message(QueueUrl=jobs, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(moved["Body"])["dedupeKey"] == KEY


def test_the_secret_is_read_once_per_execution_environment(pipeline, secret_arn):
    clock = FakeClock()
    consumer = private(pipeline, clock, secret_arn)
    client = consumer.processor.parse.private_keys._client
    calls = []
    read = client.get_secret_value
    client.get_secret_value = lambda **kwargs: calls.append(kwargs) or read(**kwargs)
    for n in range(3):
        consumer.handle(event(*(sqs_record(job(f"k:{n}:{i}")) for i in range(4))), FakeContext(clock))
    assert len(calls) == 1 and sum(pipeline.emails_per_key().values()) == 12


def test_an_unreadable_secret_sends_nothing_claims_nothing_and_retries(pipeline, aws):
    clock = FakeClock()
    consumer = private(pipeline, clock, "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf")
    record = sqs_record(job(KEY))
    assert failed_ids(consumer.handle(event(record), FakeContext(clock))) == {record["messageId"]}
    assert pipeline.emails_for(KEY) == 0
    assert boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"] == []
    assert SECRET not in consumer.log._stream.getvalue()


def test_the_operator_types_the_clear_key(pipeline, secret_arn, capsys):
    clock = FakeClock()
    private(pipeline, clock, secret_arn).handle(event(sqs_record(job(KEY))), FakeContext(clock))
    where = ["--table", pipeline.table_name, "--key-secret", secret_arn]
    assert sendonce([*where, "--json", "status", KEY]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "SENT" and shown["key"] == digest(KEY)
    assert sendonce([*where, "status", KEY]) == 0
    assert capsys.readouterr().out.startswith(f"{KEY} ({digest(KEY)})\n")  # what the operator typed, and its digest
    assert sendonce([*where, "status", digest(KEY)]) == 0  # a digest from a listing is taken as it is
    assert "SENT" in capsys.readouterr().out
    assert sendonce(["--table", pipeline.table_name, "status", KEY]) == 0  # without the secret: not found
    assert "never seen" in capsys.readouterr().out


def test_the_operator_resolves_a_private_key_by_its_clear_text(pipeline, secret_arn, capsys):
    clock = FakeClock()
    consumer = private(pipeline, clock, secret_arn, delivery=DeliveryPolicy.NEVER_RESEND, ses_events=False)
    consumer.processor._ledger.claim(digest(KEY), "dead-worker", clock.now_ms() - 1, "h")
    consumer.handle(event(sqs_record(job(KEY))), FakeContext(clock))  # a dead worker's claim: UNKNOWN
    assert pipeline.status(digest(KEY)) == "UNKNOWN"
    assert sendonce(["--table", pipeline.table_name, "--key-secret", secret_arn, "resolve", KEY, "--sent"]) == 0
    assert "was UNKNOWN; recorded SENT" in capsys.readouterr().out
    assert pipeline.status(digest(KEY)) == "SENT" and pipeline.emails_for(KEY) == 0


def test_ses_refusal_texts_lose_their_addresses_in_the_dlq_and_the_log(pipeline):
    consumer = pipeline.consumer()
    refused = job("k:refused", **{"from": "Shop <nobody@unverified.example.net>"})
    consumer.handle(event(sqs_record(refused)), FakeContext(FakeClock()))
    [message] = pipeline.dead_letters()
    reason = message["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert reason.startswith("MessageRejected") and "<address>" in reason
    written = json.dumps(message["MessageAttributes"]) + consumer.log._stream.getvalue()
    assert "nobody@unverified.example.net" not in written


def test_log_lines_never_carry_addresses_subjects_or_bodies(pipeline):
    consumer = pipeline.consumer()
    jobs = [job("k:ok", to=["Ada <ada@example.org>"], cc=["bob@example.org"], text="secret body"),
            job("k:bad-to", to=["ada@example.org, eve@example.org"], text="secret body"),
            job("k:bad-from", **{"from": "shop@@example.com"}, text="secret body")]
    consumer.handle(event(*(sqs_record(j) for j in jobs)), FakeContext(FakeClock()))
    log = consumer.log._stream.getvalue()
    assert len(log.splitlines()) == 3
    for text in ("example.org", "shop@", "Receipt k:", "secret body"):
        assert text not in log, text


def private_stack():
    stack = cdk.Stack(cdk.App(), "Private")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", key_privacy=True)
    operator = iam.Role(stack, "Operator", assumed_by=iam.AccountRootPrincipal())
    pipeline.grant_operate(operator)
    return stack, pipeline


def test_the_construct_keeps_the_secret_and_grants_it_to_the_consumer_and_the_operator_only():
    stack, pipeline = private_stack()
    template = Template.from_stack(stack)
    [(secret_id, secret)] = template.find_resources("AWS::SecretsManager::Secret").items()
    assert secret_id == "ReceiptsKeySecret37FC6A8F"  # pinned: a new secret would forget every record
    assert secret["DeletionPolicy"] == "Retain" and secret["Properties"]["GenerateSecretString"]["PasswordLength"] == 64
    readers = {name for name, policy in template.find_resources("AWS::IAM::Policy").items()
               if "secretsmanager:GetSecretValue" in json.dumps(policy)}
    assert readers == {next(name for name in readers if name.startswith("ReceiptsConsumerRole")),
                       next(name for name in readers if name.startswith("OperatorDefaultPolicy"))}
    assert len(readers) == 2  # the recorder never needs it: it reads the digest from SES's tags
    consumer = template.find_resources("AWS::Lambda::Function", {"Properties": {"Description": Match.string_like_regexp(
        "sendonce consumer")}})
    variables = next(iter(consumer.values()))["Properties"]["Environment"]["Variables"]
    assert variables[Env.KEY_SECRET_ARN] == {"Ref": secret_id}
    outputs = {o["Description"]: o["Value"] for o in template.to_json()["Outputs"].values()}
    assert outputs["sendonce:Private/Receipts:key-secret"] == {"Ref": secret_id}
    assert outputs["sendonce:Private/Receipts:dedupe-ttl"] == "604800"
    assert pipeline.key_secret is not None


def test_without_key_privacy_there_is_no_secret():
    stack = cdk.Stack(cdk.App(), "Clear")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    Template.from_stack(stack).resource_count_is("AWS::SecretsManager::Secret", 0)
    assert pipeline.key_secret is None


def test_the_secret_and_its_grants_deploy_to_the_emulator_and_the_operator_finds_them(aws, capsys):
    stack, _ = private_stack()
    template = Template.from_stack(stack).to_json()
    for resource in template["Resources"].values():  # code assets live in the bootstrap bucket: inline a stub
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"]["Code"] = {"ZipFile": "def handler(event, context): pass"}
    template.pop("Rules", None)
    template.pop("Parameters", None)
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName="Private", TemplateBody=json.dumps(template),
                                Capabilities=["CAPABILITY_IAM"])
    resources = cloudformation.describe_stack_resources(StackName="Private")["StackResources"]
    [secret] = [r for r in resources if r.get("ResourceType") == "AWS::SecretsManager::Secret"]
    value = boto3.client("secretsmanager").get_secret_value(SecretId=secret["PhysicalResourceId"])["SecretString"]
    assert len(value) == 64 and value.isalnum()
    table = next(r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == "AWS::DynamoDB::Table")
    boto3.client("dynamodb").put_item(TableName=table, Item={
        "dedupeKey": {"S": key_digest(value.encode(), KEY)}, "status": {"S": "SENT"}})
    assert sendonce(["--stack", "Private", "--json", "status", KEY]) == 0  # the stack names the secret
    assert json.loads(capsys.readouterr().out)["status"] == "SENT"


def test_the_application_reads_and_cancels_by_the_clear_key_with_the_pipelines_secret(pipeline, secret_arn):
    from sendonce_producer import Pipeline

    app = Pipeline(queue_url="unused", table_name=pipeline.table_name, key_secret_arn=secret_arn)
    clock = FakeClock()
    private(pipeline, clock, secret_arn).handle(event(sqs_record(job(KEY))), FakeContext(clock))
    record = app.status(KEY)
    assert record is not None and record.key == digest(KEY) and record.status == "SENT"
    assert app.cancel("order-1043:shipped:bob@example.org").cancelled
    assert pipeline.ledger_item(digest("order-1043:shipped:bob@example.org"))["status"]["S"] == "CANCELLED"
    late = private(pipeline, clock, secret_arn)
    late.handle(event(sqs_record(job("order-1043:shipped:bob@example.org"))), FakeContext(clock))
    assert pipeline.emails_for("order-1043:shipped:bob@example.org") == 0
