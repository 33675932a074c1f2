"""Tenants: a job's tenant is its message's MessageGroupId on a standard queue (SQS fair queues; its digest under
key_privacy), every way a job reaches the queue keeps it, SES's TenantName carries it with ses_tenants, the logs,
the ledger and the outcome events name it, and the emulator's SQS hands a quiet tenant's jobs out during another's
flood. Messages are read back from the emulator's SQS, sends from its SES."""

from __future__ import annotations

import io
import json
import logging
import re
import sqlite3
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from construct_support import policy_statements, ses_statement
from consumer_harness import FakeClock, FakeContext, event
from hypothesis import given
from hypothesis import strategies as st
from sql_databases import OutboxDatabase
from test_producer import outbox_records, outbox_tables

from sendonce_constructs import (
    ReputationPolicy,
    SendOnceConfigurationError,
    SendOnceEmailQueue,
    SuppressionReason,
    SuppressionScope,
    TenantSuppression,
)
from sendonce_contract.allowed_recipients import parse_entries
from sendonce_contract.deploy_config import ConsumerConfig, Env
from sendonce_contract.key_digest import KeyDigester
from sendonce_contract.outcome_events import transitions
from sendonce_contract.schema import Ledger
from sendonce_contract.tenant import MAX_TENANT_CHARS, TENANT_RULE, digest_input
from sendonce_local.emulator.sqs_fair_queues import fair_order
from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record
from sendonce_ops.cli import main as sendonce
from sendonce_producer import EmailJob, InvalidJob, Pipeline, enqueue, enqueue_many, outbox_put
from sendonce_producer.sql_connect import database
from sendonce_producer.sql_outbox import add
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings
from sendonce_runtime.outbox_relay import relay
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_testing.lambda_events import SENDER_DOMAIN

SECRET = "t" * 32 + "5" * 32


def receipt(n: int | str, tenant: str | None = "acme", **overrides: Any) -> EmailJob:
    fields: dict[str, Any] = {"dedupe_key": f"order-{n}:receipt", "sender": f"Shop <receipts@{SENDER_DOMAIN}>",
                              "to": [f"c{n}@example.org"], "subject": f"Receipt order-{n}:receipt", "text": "Thanks.",
                              "tenant": tenant}
    fields.update(overrides)
    return EmailJob(**fields)


def queue(name: str = "jobs", fifo: bool = False) -> str:
    attributes = {"FifoQueue": "true"} if fifo else {}
    return str(boto3.client("sqs").create_queue(QueueName=name + (".fifo" if fifo else ""),
                                                Attributes=attributes)["QueueUrl"])


def receive_all(url: str, expect: int, bound_s: float = 10) -> list[dict[str, Any]]:
    """Every message on ``url`` (hidden once seen, as a poller takes them), polled with a bound."""
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + bound_s
    while len(found) < expect and time.monotonic() < deadline:
        found += boto3.client("sqs").receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=300,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
    return found


def group_ids(messages: list[dict[str, Any]]) -> list[str | None]:
    return [m.get("Attributes", {}).get("MessageGroupId") for m in messages]


def tenant_digest(tenant: str) -> str:
    return KeyDigester(SECRET.encode())(digest_input(tenant))


@pytest.fixture
def secret_arn(aws) -> str:
    return boto3.client("secretsmanager").create_secret(Name="sendonce-tenant-keys", SecretString=SECRET)["ARN"]


def as_lambda_records(messages: list[dict[str, Any]], url: str) -> dict[str, Any]:
    source = EventSourceSpec(queue_url=url, queue_arn="arn:aws:sqs:us-east-1:123456789012:jobs")
    return event(*(lambda_record(m, source, "us-east-1") for m in messages))


# -- the producer ---------------------------------------------------------------------------------------------------

def test_a_tenant_is_its_message_s_group_id_on_a_standard_queue(aws):
    url = queue()
    enqueue(url, receipt(1))
    assert enqueue_many(url, [receipt(2, tenant="globex"), receipt(3, tenant=None)]) == []
    by_key = {json.loads(m["Body"])["dedupeKey"]: m for m in receive_all(url, 3)}
    assert group_ids([by_key[f"order-{n}:receipt"] for n in (1, 2, 3)]) == ["acme", "globex", None]
    assert json.loads(by_key["order-1:receipt"]["Body"])["contractVersion"] == 3  # an older consumer waits


def test_under_key_privacy_the_group_id_is_the_tenant_s_keyed_digest(aws, secret_arn):
    url = queue()
    pipeline = Pipeline(queue_url=url, table_name="dedupe", key_secret_arn=secret_arn)
    pipeline.enqueue(receipt(1))
    pipeline.enqueue_many([receipt(2)])
    assert group_ids(receive_all(url, 2)) == [tenant_digest("acme")] * 2
    assert pipeline.tenant_label("acme") == tenant_digest("acme") != "acme"


def test_on_a_fifo_queue_the_tenant_leaves_the_recipient_s_group_alone(aws):
    url = queue(fifo=True)
    enqueue(url, receipt(1))
    assert group_ids(receive_all(url, 1)) == ["c1@example.org"]


@pytest.mark.parametrize("tenant", ["acme corp", "", "a" * (MAX_TENANT_CHARS + 1), "acme:eu", "café"])
def test_a_tenant_outside_ses_s_rule_is_refused_by_the_producer(tenant):
    with pytest.raises(InvalidJob, match="must be " + TENANT_RULE.replace("(", r"\(").replace(")", r"\)")):
        receipt(1, tenant=tenant)


def test_a_job_with_a_bad_tenant_goes_to_the_dlq_with_the_reason_and_is_not_sent(pipeline):
    url = queue()
    body = json.dumps({**json.loads(receipt(1).to_message()), "tenant": "acme corp"})
    boto3.client("sqs").send_message(QueueUrl=url, MessageBody=body, MessageGroupId="acme corp")
    consumer = pipeline.consumer(FakeClock(), queue_url=url)
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    [dead] = pipeline.dead_letters()
    assert "tenant 'acme corp' must be " + TENANT_RULE in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert pipeline.emails_for("order-1:receipt") == 0


# -- the consumer ---------------------------------------------------------------------------------------------------

def test_with_ses_tenants_the_send_names_the_tenant_and_without_it_none(pipeline):
    url = queue()
    enqueue(url, receipt(1))
    enqueue(url, receipt(2))
    first, second = sorted(receive_all(url, 2), key=lambda m: json.loads(m["Body"])["dedupeKey"])
    pipeline.consumer(FakeClock(), queue_url=url, ses_tenants=True).handle(
        as_lambda_records([first], url), FakeContext(FakeClock()))
    pipeline.consumer(FakeClock(), queue_url=url).handle(as_lambda_records([second], url), FakeContext(FakeClock()))
    assert pipeline.emails_for("order-1:receipt") == pipeline.emails_for("order-2:receipt") == 1
    first_id = pipeline.ledger_item("order-1:receipt")[Ledger.SES_MESSAGE_ID]["S"]
    second_id = pipeline.ledger_item("order-2:receipt")[Ledger.SES_MESSAGE_ID]["S"]
    tenants = {send["messageId"]: send["tenantName"] for send in pipeline.aws.ses_sends()}  # over HTTP
    assert tenants[first_id] == "acme" and tenants[second_id] is None


def test_the_log_line_the_ledger_and_the_outcome_events_name_the_tenant(pipeline):
    url = queue()
    enqueue(url, receipt(1))
    consumer = pipeline.consumer(FakeClock(), queue_url=url)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts")
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    [line] = [json.loads(text) for text in log.getvalue().splitlines()]
    assert line["tenant"] == "acme" and line["outcome"] == "sent"
    assert ["Pipeline"] in line["_aws"]["CloudWatchMetrics"][0]["Dimensions"]
    assert ["Pipeline", "Tenant"] not in line["_aws"]["CloudWatchMetrics"][0]["Dimensions"]  # tenant_metrics off
    item = pipeline.ledger_item("order-1:receipt")
    assert item[Ledger.TENANT] == {"S": "acme"}
    [sent] = transitions(None, item, "test-pipeline")
    assert sent.detail["tenant"] == "acme"


def test_tenant_metrics_add_a_tenant_dimension(pipeline):
    url = queue()
    enqueue(url, receipt(1))
    consumer = pipeline.consumer(FakeClock(), queue_url=url)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts", by_tenant=True)
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    [line] = [json.loads(text) for text in log.getvalue().splitlines()]
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Pipeline"], ["Pipeline", "Tenant"]]
    assert line["Tenant"] == "acme" and line["EmailsSent"] == 1


def test_under_key_privacy_the_consumer_shows_the_tenant_s_digest_and_sends_its_name(pipeline, secret_arn):
    url = queue()
    Pipeline(queue_url=url, table_name="dedupe", key_secret_arn=secret_arn).enqueue(receipt(1))
    consumer = pipeline.consumer(FakeClock(), queue_url=url, key_secret_id=secret_arn, ses_tenants=True)
    consumer.log = OutcomeLog(log := io.StringIO())
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    assert json.loads(log.getvalue())["tenant"] == tenant_digest("acme")
    [tenant_name] = [send["tenantName"] for send in pipeline.aws.ses_sends()]
    assert tenant_name == "acme"  # SES's tenant has the name; everything else sees the digest
    assert "acme" not in json.dumps(boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"])


def test_a_delayed_copy_keeps_the_tenant_s_group_id(pipeline):
    url = queue()
    soon = datetime.now(UTC) + timedelta(seconds=2)
    enqueue(url, receipt(1, send_at=soon))
    consumer = pipeline.consumer(queue_url=url)
    response = consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    assert response["batchItemFailures"] == []  # replaced by its delayed copy
    [copy] = receive_all(url, 1, bound_s=15)
    assert group_ids([copy]) == ["acme"]
    assert json.loads(copy["Body"])["dedupeKey"] == "order-1:receipt"


def test_the_dead_letter_and_its_redrive_keep_the_tenant_s_group_id(pipeline, capsys):
    url = queue()
    enqueue(url, receipt(1, to=["nobody@elsewhere.example"]))
    consumer = pipeline.consumer(FakeClock(), queue_url=url, allowed_recipients=parse_entries(["example.org"]))
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    assert sendonce(["--queue", url, "--dlq", pipeline.dead_letter_queue_url, "--dedupe-ttl", "604800",
                     "dlq", "redrive"]) == 0
    assert "moved 1 messages back to the job queue" in capsys.readouterr().out
    [moved] = receive_all(url, 1)
    assert group_ids([moved]) == ["acme"]


# -- the relays -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("private", [False, True], ids=["clear", "key-privacy"])
def test_the_outbox_relay_keeps_the_tenant(aws, secret_arn, private):
    dynamodb = outbox_tables()
    dynamodb.transact_write_items(TransactItems=[outbox_put("outbox", receipt(1))])
    url = queue()
    digest = KeyDigester(SECRET.encode()) if private else None
    assert relay(outbox_records(dynamodb), boto3.client("sqs"), url, fifo=False, digest=digest) == []
    assert group_ids(receive_all(url, 1)) == [tenant_digest("acme") if private else "acme"]


@pytest.mark.parametrize("private", [False, True], ids=["clear", "key-privacy"])
def test_the_sql_relay_keeps_the_tenant(aws, secret_arn, tmp_path, private):
    path = tmp_path / "app.db"
    sqlite3.connect(path).close()
    db = OutboxDatabase("sqlite", f"sqlite:///{path}", path)
    db.reset()
    connection = db.connect()
    add(connection.cursor(), receipt(1))
    connection.commit()
    connection.close()
    url = queue()
    outbox = OutboxRelay(database(db.dsn), RelaySettings(url, key_secret_arn=secret_arn if private else None),
                         log=lambda line: None)
    try:
        outbox.drain()
    finally:
        outbox.close()
    assert group_ids(receive_all(url, 1)) == [tenant_digest("acme") if private else "acme"]


# -- the emulator's fair queue --------------------------------------------------------------------------------------

def test_a_flooding_tenant_does_not_hold_a_quiet_tenant_s_jobs_behind_its_flood(aws):
    url = queue()
    sqs = boto3.client("sqs")
    flood = [receipt(n, tenant="flood") for n in range(100)]
    assert enqueue_many(url, flood) == []
    assert enqueue_many(url, [receipt(f"q{n}", tenant="quiet") for n in range(5)]) == []
    order: list[str | None] = []
    while len(order) < 105:  # two pollers' worth of batches, each deleted once handled
        batch = receive_all(url, 1)
        order += group_ids(batch)
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                         for i, m in enumerate(batch)])
    # Sent after all 100, without fair queues the quiet tenant's five would come last; here, right after the
    # first batch shows the flood's share of what is received.
    assert [i for i, group in enumerate(order) if group == "quiet"] == [10, 11, 12, 13, 14]


# -- the construct --------------------------------------------------------------------------------------------------

def test_ses_tenants_grants_the_account_s_tenants_associates_a_tenant_s_resources_and_stays_cdk_nag_clean():
    stack = cdk.Stack(cdk.App(), "Test")
    receipts = SendOnceEmailQueue(stack, "Receipts", sender="example.com", template_names=["Receipt"],
                                  ses_tenants=True, tenant_metrics=True)
    receipts.add_ses_tenant("acme")
    template = Template.from_stack(stack)
    resources = json.dumps(ses_statement(template)["Resource"])
    assert ":tenant/*" in resources and ":identity/example.com" in resources
    [tenant] = template.find_resources("AWS::SES::Tenant").values()
    assert tenant["Properties"]["TenantName"] == "acme"
    associated = json.dumps(tenant["Properties"]["ResourceAssociations"])
    assert all(part in associated for part in (":identity/example.com", ":configuration-set/", ":template/Receipt"))
    assert ":tenant/" not in associated
    [consumer] = [f for f in template.find_resources("AWS::Lambda::Function").values()
                  if Env.DLQ_URL in f["Properties"]["Environment"]["Variables"]
                  and Env.QUEUE_URL in f["Properties"]["Environment"]["Variables"]
                  and f["Properties"]["Handler"].endswith("handler.handler")]
    config = ConsumerConfig.from_env({k: str(v) for k, v in consumer["Properties"]["Environment"]["Variables"].items()})
    assert config.ses_tenants and config.tenant_metrics
    for pack in (AwsSolutionsChecks, ServerlessChecks):
        report = pack(stack.node.root).validate_scope(stack)
        assert report.violations == [] and report.success


def test_ses_tenants_with_both_lanes_in_a_stack_of_a_named_account_and_region_stays_cdk_nag_clean():
    """The tenants' wildcard is named with the stack's own account and region when it has them, on each lane's
    consumer: its acknowledgement must name the same."""
    stack = cdk.Stack(cdk.App(), "Test", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", ses_tenants=True, urgent_lane=True, send_rate=10,
                       max_concurrency=5)
    report = AwsSolutionsChecks(stack.node.root).validate_scope(stack)
    assert report.violations == [] and report.success
    sends = [s for s in policy_statements(Template.from_stack(stack)) if "ses:SendEmail" in str(s["Action"])]
    assert len(sends) == 2 and all(":eu-west-1:123456789012:tenant/*" in json.dumps(s["Resource"]) for s in sends)


@pytest.mark.parametrize(("props", "name", "error"), [
    ({}, "acme", "SendOnce.NeedsSesTenants"),
    ({"ses_tenants": True}, "acme corp", "SendOnce.InvalidTenantName"),
])
def test_add_ses_tenant_fails_synth_naming_what_is_wrong(props, name, error):
    receipts = SendOnceEmailQueue(cdk.Stack(cdk.App(), "Test"), "Receipts", sender="example.com", **props)
    with pytest.raises(SendOnceConfigurationError) as raised:
        receipts.add_ses_tenant(name)
    assert raised.value.id == error and "Test/Receipts" in str(raised.value)


def test_add_ses_tenant_sets_the_tenants_reputation_policy_and_its_own_suppression_list():
    stack = cdk.Stack(cdk.App(), "Test", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    receipts = SendOnceEmailQueue(stack, "Receipts", sender="example.com", ses_tenants=True)
    receipts.add_ses_tenant("acme", reputation_policy=ReputationPolicy.STRICT, suppression=TenantSuppression())
    receipts.add_ses_tenant("globex", suppression=TenantSuppression(
        scope=SuppressionScope.ACCOUNT, reasons=[SuppressionReason.COMPLAINT]))
    receipts.add_ses_tenant("initech")
    tenants = {t["Properties"]["TenantName"]: t["Properties"]
               for t in Template.from_stack(stack).find_resources("AWS::SES::Tenant").values()}
    assert tenants["acme"]["ReputationEntity"] == {"Policy": {"ReputationEntityPolicy": {"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, ":ses:eu-west-1:aws:reputation-policy/strict"]]}}}
    assert tenants["acme"]["SuppressionAttributes"] == {"SuppressedReasons": ["BOUNCE", "COMPLAINT"],
                                                        "SuppressionScope": "TENANT"}
    assert tenants["globex"]["SuppressionAttributes"] == {"SuppressedReasons": ["COMPLAINT"],
                                                          "SuppressionScope": "ACCOUNT"}
    assert "ReputationEntity" not in tenants["globex"]
    assert "ReputationEntity" not in tenants["initech"] and "SuppressionAttributes" not in tenants["initech"]


@pytest.mark.parametrize(("settings", "message"), [
    ({"reputation_policy": "medium"},
     "add_ses_tenant: reputation policy ('medium') must be one of ReputationPolicy.NONE, ReputationPolicy.STANDARD, "
     "ReputationPolicy.STRICT; for example reputation_policy=ReputationPolicy.STRICT, or leave it out for SES's "
     "standard"),
    ({"suppression": {"SuppressionScope": "TENANT"}},
     "add_ses_tenant: suppression ({'SuppressionScope': 'TENANT'}) must be a TenantSuppression; for example "
     "suppression=TenantSuppression() (the tenant's own list, on bounces and complaints)"),
], ids=["a policy SES has not", "suppression as a dict"])
def test_add_ses_tenant_refuses_settings_ses_would_naming_the_value_and_the_fix(settings, message):
    receipts = SendOnceEmailQueue(cdk.Stack(cdk.App(), "Test"), "Receipts", sender="example.com", ses_tenants=True)
    with pytest.raises(SendOnceConfigurationError) as raised:
        receipts.add_ses_tenant("acme", **settings)
    assert raised.value.id == "SendOnce.InvalidSesTenantSettings" and message in str(raised.value)


@pytest.mark.parametrize(("settings", "message"), [
    ({"reasons": ["BOUNCES"]}, "suppression reason ('BOUNCES') must be one of SuppressionReason.BOUNCE, "
                               "SuppressionReason.COMPLAINT"),
    ({"reasons": ["BOUNCE", "BOUNCE"]}, "suppression reasons (['BOUNCE', 'BOUNCE']) name one twice"),
    ({"reasons": "BOUNCE"}, "suppression reasons ('BOUNCE') must be a list of SuppressionReason.BOUNCE, "
                            "SuppressionReason.COMPLAINT"),
    ({"scope": "tenant"}, "suppression scope ('tenant') must be one of SuppressionScope.ACCOUNT, "
                          "SuppressionScope.TENANT"),
], ids=["a reason SES has not", "a reason twice", "a reason not in a list", "a scope in lower case"])
def test_a_tenant_suppression_ses_would_refuse_fails_where_it_is_written(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        TenantSuppression(**settings)


def test_a_deployed_tenants_policy_and_suppression_list_are_what_sendonce_tenants_shows(aws, capsys):
    """The tenant as add_ses_tenant writes it, deployed to the emulator (which plays AWS::SES::Tenant), read back
    through SES's API by `sendonce tenants`; a tenant made through SES's API with neither shows SES's defaults."""
    stack = cdk.Stack(cdk.App(), "Test")
    receipts = SendOnceEmailQueue(stack, "Receipts", sender="example.com", ses_tenants=True)
    receipts.add_ses_tenant("acme", reputation_policy=ReputationPolicy.STRICT, suppression=TenantSuppression())
    [tenant] = Template.from_stack(stack).find_resources("AWS::SES::Tenant").values()
    tenant["Properties"]["ResourceAssociations"] = []  # the pipeline's resources are not in this stack
    cloudformation = boto3.client("cloudformation")
    cloudformation.create_stack(StackName="Tenants", TemplateBody=json.dumps({"Resources": {"Acme": tenant}}))
    assert cloudformation.describe_stacks(StackName="Tenants")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    boto3.client("sesv2").create_tenant(TenantName="globex")

    assert sendonce(["tenants"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^acme\s+ENABLED\s+ENABLED\s+ENABLED\s+-\s+strict\s+tenant \(bounce, complaint\)$", out, re.M)
    assert re.search(r"^globex\s+ENABLED\s+ENABLED\s+ENABLED\s+-\s+standard\s+account$", out, re.M)
    assert sendonce(["--json", "tenants"]) == 0
    listed = {t["tenant"]: t for t in json.loads(capsys.readouterr().out)["tenants"]}
    assert (listed["acme"]["reputation_policy"], listed["acme"]["suppression_scope"],
            listed["acme"]["suppressed_reasons"]) == ("strict", "TENANT", ["BOUNCE", "COMPLAINT"])
    cloudformation.delete_stack(StackName="Tenants")
    assert [t["TenantName"] for t in boto3.client("sesv2").list_tenants()["Tenants"]] == ["globex"]


class _Sent:
    def __init__(self, number: int, group_id: str | None) -> None:
        self.number = number
        self.group_id = group_id


@given(groups=st.lists(st.sampled_from(["a", "b", "c", None]), max_size=40),
       noisy=st.sets(st.sampled_from(["a", "b", "c"])),
       in_flight=st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 50)))
def test_a_fair_order_hands_quiet_tenants_out_first_and_keeps_each_tenant_s_own_order(groups, noisy, in_flight):
    sent = [_Sent(n, group) for n, group in enumerate(groups)]
    counts = Counter(in_flight)
    order = fair_order(sent, noisy, counts)
    assert sorted(m.number for m in order) == list(range(len(sent)))  # nothing dropped, nothing doubled
    quiet = [m.group_id is None or m.group_id not in noisy for m in order]
    assert quiet == sorted(quiet, reverse=True)  # every quiet tenant's message before any noisy one's
    for group in {*groups}:
        own = [m.number for m in order if m.group_id == group]
        assert own == sorted(own)  # within a tenant, the order they were sent
    noisy_counts = [counts[m.group_id] for m in order if m.group_id in noisy]
    assert noisy_counts == sorted(noisy_counts)  # among noisy tenants, fewest in flight first


def test_under_key_privacy_a_tenant_name_in_clear_on_the_queue_is_reported_without_the_name(pipeline, secret_arn,
                                                                                             caplog):
    url = queue()
    enqueue(url, receipt(1))  # the producer was not given the key secret
    consumer = pipeline.consumer(FakeClock(), queue_url=url, key_secret_id=secret_arn)
    caplog.set_level(logging.WARNING, logger="sendonce")
    consumer.handle(as_lambda_records(receive_all(url, 1), url), FakeContext(FakeClock()))
    [warning] = [r.getMessage() for r in caplog.records if "MessageGroupId" in r.getMessage()]
    assert "key_secret_arn" in warning and "acme" not in warning
    assert pipeline.emails_for("order-1:receipt") == 1  # sent all the same
