"""The application reads what became of each email with the producer's API: the same codec as the operator's."""

from __future__ import annotations

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from construct_support import actions_of
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record

from sendonce_constructs import SendOnceEmailQueue
from sendonce_contract.schema import Status
from sendonce_producer import EmailJob, Pipeline, dedupe_key, status

SIMULATOR = "simulator.amazonses.com"


def test_status_tells_the_application_what_ses_said_of_each_email(pipeline):
    clock = FakeClock()
    ses_events = pipeline.ses_events(clock)
    consumer = pipeline.consumer(clock, **pipeline.evidence_settings())
    delivered, bounced = "receipt:1:ada", "receipt:2:bob"
    consumer.handle(event(sqs_record(job(delivered)), sqs_record(job(bounced, to=[f"bounce@{SIMULATOR}"]))),
                    FakeContext(clock))
    ses_events.pump(float("inf"))

    app = Pipeline(queue_url="unused", table_name=pipeline.table_name)
    ok = app.status(delivered)
    assert ok is not None and ok.state is Status.SENT and not ok.double_send
    assert ok.ses_message_ids and ok.evidence_at_ms is not None
    assert ok.outcome("delivered") is not None and ok.outcome("bounced") is None
    bounce = status(pipeline.table_name, bounced)
    assert bounce is not None and bounce.outcome("bounced") is not None
    assert bounce.outcome("bounced").detail == "Permanent/General" and bounce.outcome("bounced").at_ms
    assert app.status("receipt:never:enqueued") is None


def test_a_forgotten_key_reads_as_none_as_the_next_delivery_would_send_it(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock, dedupe_ttl_s=60).handle(event(sqs_record(job("k:old"))), FakeContext(clock))
    assert status(pipeline.table_name, "k:old") is not None
    boto3.client("dynamodb").update_item(TableName=pipeline.table_name, Key={"dedupeKey": {"S": "k:old"}},
                                         UpdateExpression="SET expiresAt = :past",
                                         ExpressionAttributeValues={":past": {"N": "1"}})
    assert status(pipeline.table_name, "k:old") is None


def test_a_pipeline_client_enqueues_to_its_queue_and_writes_to_its_outbox(aws):
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="app-jobs")["QueueUrl"]
    app = Pipeline(queue_url=queue_url, table_name="dedupe", outbox_table_name="outbox", sqs=sqs)
    job_ = EmailJob(dedupe_key=dedupe_key("order-9", "receipt"), sender="shop@example.com", to=["ada@example.org"],
                    subject="Receipt", text="Thanks")
    app.enqueue(job_)
    assert app.enqueue_many([job_]) == []
    assert int(sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages"])
               ["Attributes"]["ApproximateNumberOfMessages"]) == 2
    assert app.outbox_put(job_)["Update"]["TableName"] == "outbox"
    with pytest.raises(ValueError, match="outbox"):
        Pipeline(queue_url=queue_url, table_name="dedupe").outbox_put(job_)


def test_grant_status_read_allows_get_item_and_the_tables_key_only():
    stack = cdk.Stack(cdk.App(), "Test")
    key = kms.Key(stack, "Key")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", encryption_key=key)
    reader = iam.Role(stack, "Reader", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    grant = pipeline.grant_status_read(reader)
    assert grant.success
    template = Template.from_stack(stack).to_json()
    [policy] = [r for name, r in template["Resources"].items()
                if r["Type"] == "AWS::IAM::Policy" and name.startswith("ReaderDefaultPolicy")]
    assert actions_of(policy["Properties"]["PolicyDocument"]["Statement"]) == {"dynamodb:GetItem", "kms:Decrypt"}
