"""The attachments bucket (S3 claim checks) and the queue's maximum message size, as synth builds and checks them:
the bucket made (encrypted, TLS only, private, expiring when no job can still be sent), a bucket brought (checked
where CDK can see it), the grants (exact), the rules (each naming the prop, the value, the rule and the fix)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from cfnlint.api import ManualArgs, lint
from construct_support import build, make_stack, only, queue_by_retention

from sendonce_constructs import SendOnceConfigurationError, SendOnceEmailQueue
from sendonce_constructs.rules import LAMBDA_PAYLOAD_BYTES, SQS_RECORD_ENVELOPE_BYTES, attachment_lifetime_days
from sendonce_contract.deploy_config import ConsumerConfig, Env
from sendonce_contract.sqs_limits import SQS_DEFAULT_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES

DAY = 86_400
FOURTEEN_DAYS = 14 * DAY
CONSUMER = {"Handler": "sendonce_runtime.handler.handler"}


def bucket_of(template: Template) -> tuple[str, dict]:
    [(name, bucket)] = template.find_resources("AWS::S3::Bucket").items()
    return name, bucket


def statements_of(template: Template, policy_prefix: str) -> list[dict]:
    return [statement for name, policy in template.find_resources("AWS::IAM::Policy").items()
            if name.startswith(policy_prefix) for statement in policy["Properties"]["PolicyDocument"]["Statement"]]


def on_bucket(statements: list[dict], bucket: str) -> list[dict]:
    return [s for s in statements if bucket in json.dumps(s["Resource"])]


def producer_stack(**props: object) -> tuple[cdk.Stack, SendOnceEmailQueue, iam.Role]:
    stack = make_stack()
    key = kms.Key(stack, "Key", enable_key_rotation=True) if props.pop("with_key", False) else None
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", encryption_key=key, **props)
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    return stack, pipeline, producer


# What the bucket the construct makes is.

def test_no_attachments_bucket_by_default_and_the_consumer_is_told_of_none():
    pipeline, template = build()
    assert template.find_resources("AWS::S3::Bucket") == {}
    assert pipeline.attachments_bucket is None and pipeline.attachments_expiry is None
    env = only(template, "AWS::Lambda::Function", Properties=CONSUMER)["Properties"]["Environment"]["Variables"]
    assert Env.ATTACHMENTS_BUCKET not in env
    assert not [s for s in statements_of(template, "ReceiptsConsumer") if "s3:" in json.dumps(s["Action"])]


def test_the_bucket_made_is_encrypted_private_tls_only_unversioned_and_retained_like_the_queues():
    pipeline, template = build(attachments_bucket=True)
    _, bucket = bucket_of(template)
    props = bucket["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"] == [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True}
    assert props["OwnershipControls"] == {"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}
    assert "VersioningConfiguration" not in props
    assert (bucket["DeletionPolicy"], bucket["UpdateReplacePolicy"]) == ("Retain", "Retain")
    [policy] = template.find_resources("AWS::S3::BucketPolicy").values()
    denials = [s["Condition"] for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in denials
    assert {"NumericLessThan": {"s3:TlsVersion": 1.2}} in denials
    _, destroyed = build(attachments_bucket=True, queue_removal_policy=cdk.RemovalPolicy.DESTROY)
    assert bucket_of(destroyed)[1]["DeletionPolicy"] == "Delete"
    assert pipeline.attachments_bucket is not None


def test_with_a_customer_key_the_bucket_is_encrypted_under_it_with_a_bucket_key():
    stack, _, _ = producer_stack(attachments_bucket=True, with_key=True)
    encryption = bucket_of(Template.from_stack(stack))[1]["Properties"]["BucketEncryption"]
    [rule] = encryption["ServerSideEncryptionConfiguration"]
    assert rule["BucketKeyEnabled"] is True
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    assert rule["ServerSideEncryptionByDefault"]["KMSMasterKeyID"]["Fn::GetAtt"][0].startswith("Key")


def test_objects_expire_once_no_job_can_still_be_sent_and_abandoned_uploads_after_a_day():
    pipeline, template = build(attachments_bucket=True)
    # 4 days before the first receive + 7 days of sendAt + 4 days for the copy due then + 14 days in the DLQ +
    # 4 days after a redrive + 1 day of margin.
    assert bucket_of(template)[1]["Properties"]["LifecycleConfiguration"] == {"Rules": [{
        "Id": "ExpireAttachments", "Status": "Enabled", "ExpirationInDays": 34,
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]}
    assert pipeline.attachments_expiry.to_days() == 34


@pytest.mark.parametrize(("props", "days"), [
    ({}, 34),
    ({"retention_period": cdk.Duration.days(14), "dedupe_ttl": cdk.Duration.days(14)}, 5 * 14 + 1),
    ({"retention_period": cdk.Duration.hours(1), "dedupe_ttl": cdk.Duration.days(1)}, 17),  # 16 days 3 hours
    ({"dedupe_ttl": cdk.Duration.days(30)}, 4 + 30 + 4 + 14 + 4 + 1),
    ({"fifo": True}, 4 + 14 + 4 + 1),  # no sendAt on a FIFO queue
    ({"outbox": True}, 1 + 4 + 19 + 4 + 14 + 4 + 1),  # the stream's day; dedupe_ttl then defaults to 19 days
    ({"retention_period": cdk.Duration.hours(36), "dedupe_ttl": cdk.Duration.hours(40)}, 22),  # rounded up
], ids=["defaults", "14-day retention", "shortest", "30-day dedupe_ttl", "fifo", "outbox", "partial days"])
def test_the_expiry_derives_from_retention_sendat_the_dlq_and_a_redrive(props, days):
    _, template = build(attachments_bucket=True, **props)
    assert bucket_of(template)[1]["Properties"]["LifecycleConfiguration"]["Rules"][0]["ExpirationInDays"] == days


def test_the_expiry_is_the_sum_of_its_terms_in_whole_days():
    assert attachment_lifetime_days(4 * DAY, 7 * DAY, fifo=False, outbox=False) == 34
    assert attachment_lifetime_days(4 * DAY, 7 * DAY + 1, fifo=False, outbox=False) == 35


def test_the_consumer_is_told_the_bucket_and_reads_its_objects_only():
    _, template = build(attachments_bucket=True)
    name, _ = bucket_of(template)
    env = only(template, "AWS::Lambda::Function", Properties=CONSUMER)["Properties"]["Environment"]["Variables"]
    assert env[Env.ATTACHMENTS_BUCKET] == {"Ref": name}
    consumer = statements_of(template, "ReceiptsConsumer")
    assert on_bucket(consumer, name) == [
        {"Action": "s3:GetObject", "Effect": "Allow", "Resource": {
            "Fn::Join": ["", [{"Fn::GetAtt": [name, "Arn"]}, "/*"]]}},
        # So a missing object answers 404 (attachment-missing), not 403.
        {"Action": "s3:ListBucket", "Effect": "Allow", "Resource": {"Fn::GetAtt": [name, "Arn"]}}]
    assert [s for s in consumer if "s3:" in json.dumps(s["Action"])] == on_bucket(consumer, name)


def test_the_bucket_name_is_a_stack_output_for_producers():
    _, template = build(attachments_bucket=True)
    name, _ = bucket_of(template)
    [output] = [o for o in template.to_json()["Outputs"].values() if o["Description"].endswith(":attachments")]
    assert output == {"Description": "sendonce:Test/Receipts:attachments", "Value": {"Ref": name}}


def test_the_consumer_config_round_trips_the_bucket():
    config = ConsumerConfig(table_name="t", dead_letter_queue_url="q", attachments_bucket="invoices")
    assert ConsumerConfig.from_env(config.to_env()).attachments_bucket == "invoices"


# grant_attach: what a producer gets, and nothing more.

def test_grant_attach_gives_a_producer_put_object_on_the_bucket_and_nothing_else():
    stack, pipeline, producer = producer_stack(attachments_bucket=True)
    grant = pipeline.grant_attach(producer)
    template = Template.from_stack(stack)
    name, _ = bucket_of(template)
    assert grant.success
    assert statements_of(template, "Producer") == [{"Action": "s3:PutObject", "Effect": "Allow", "Resource": {
        "Fn::Join": ["", [{"Fn::GetAtt": [name, "Arn"]}, "/*"]]}}]


def test_grant_attach_with_a_customer_key_adds_the_data_key_calls_an_upload_makes():
    stack, pipeline, producer = producer_stack(attachments_bucket=True, with_key=True)
    pipeline.grant_attach(producer)
    statements = statements_of(Template.from_stack(stack), "Producer")
    assert [s["Action"] for s in statements] == ["s3:PutObject", ["kms:GenerateDataKey", "kms:Decrypt"]]
    assert statements[1]["Resource"]["Fn::GetAtt"][0].startswith("Key")


def test_a_bucket_brought_with_its_own_key_is_granted_and_its_key_decrypts_for_the_consumer():
    stack = make_stack()
    key = kms.Key(stack, "BucketKey", enable_key_rotation=True)
    bucket = s3.Bucket(stack, "Invoices", encryption=s3.BucketEncryption.KMS, encryption_key=key, enforce_ssl=True)
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", attachments_bucket=bucket)
    pipeline.grant_attach(producer)
    template = Template.from_stack(stack)
    assert pipeline.attachments_bucket is bucket and pipeline.attachments_expiry is None
    bucket_id = stack.get_logical_id(bucket.node.default_child)
    key_id = stack.get_logical_id(key.node.default_child)
    consumer = statements_of(template, "ReceiptsConsumer")
    assert [s["Action"] for s in on_bucket(consumer, bucket_id)] == ["s3:GetObject", "s3:ListBucket"]
    assert [s["Action"] for s in consumer if key_id in json.dumps(s["Resource"])] == ["kms:Decrypt"]
    assert [s["Action"] for s in statements_of(template, "Producer")] == [
        "s3:PutObject", ["kms:GenerateDataKey", "kms:Decrypt"]]
    env = only(template, "AWS::Lambda::Function", Properties=CONSUMER)["Properties"]["Environment"]["Variables"]
    assert env[Env.ATTACHMENTS_BUCKET] == {"Ref": bucket_id}


def test_an_imported_bucket_is_used_as_it_is():
    stack = make_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Imported", "shop-invoices")
    _, template = build(stack, attachments_bucket=bucket)
    env = only(template, "AWS::Lambda::Function", Properties=CONSUMER)["Properties"]["Environment"]["Variables"]
    assert env[Env.ATTACHMENTS_BUCKET] == "shop-invoices"
    assert [s["Action"] for s in on_bucket(statements_of(template, "ReceiptsConsumer"), "shop-invoices")] == [
        "s3:GetObject", "s3:ListBucket"]


def test_grant_attach_without_a_bucket_names_the_prop():
    _, pipeline, producer = producer_stack()
    with pytest.raises(SendOnceConfigurationError, match="grant_attach needs attachments_bucket=True") as error:
        pipeline.grant_attach(producer)
    assert (error.value.id, error.value.path) == ("SendOnce.NeedsAttachmentsBucket", "Test/Receipts")


# The rules on a bucket brought.

def bucket_with(stack: cdk.Stack, **props: object) -> s3.Bucket:
    return s3.Bucket(stack, "Invoices", enforce_ssl=True, **props)


@pytest.mark.parametrize(("props", "rule_id", "message"), [
    ({"lifecycle_rules": [s3.LifecycleRule(id="Tidy", expiration=cdk.Duration.days(7))]},
     "SendOnce.AttachmentsBucketExpiresTooSoon",
     "attachments_bucket's lifecycle rule 'Tidy' expires objects after 7 days: a job can still be sent 34 days after "
     "its attachments were uploaded (retention_period (345600 s) before its first receive + sendAt up to dedupe_ttl "
     "(604800 s, at most 30 days) ahead of that receive + retention_period (345600 s) for the copy due at sendAt + "
     "the DLQ's 1209600 s (14 days) + retention_period (345600 s) after a redrive + a margin of 86400 s (SES's "
     "24-hour quota window, which a job may wait out as delayed copies)), and one whose attachment is gone goes to "
     "the DLQ unsent; set its expiration to at least 34 days, or give it a prefix the attachments are not under"),
    ({"lifecycle_rules": [s3.LifecycleRule(id="Cold", transitions=[s3.Transition(
        storage_class=s3.StorageClass.GLACIER, transition_after=cdk.Duration.days(30))])]},
     "SendOnce.AttachmentsBucketExpiresTooSoon",
     "attachments_bucket's lifecycle rule 'Cold' moves objects to GLACIER after 30 days, where GetObject cannot "
     "read them without a restore"),
    ({"lifecycle_rules": [s3.LifecycleRule(id="EndOfYear", expiration_date=datetime(2030, 1, 1, tzinfo=UTC))]},
     "SendOnce.AttachmentsBucketExpiresTooSoon",
     "attachments_bucket's lifecycle rule 'EndOfYear' expires every object on"),
    ({"block_public_access": s3.BlockPublicAccess(block_public_policy=False, block_public_acls=True,
                                                  ignore_public_acls=True, restrict_public_buckets=True)},
     "SendOnce.AttachmentsBucketPublic",
     "attachments_bucket does not block all public access: attachments are invoices, tickets and other personal "
     "files; create it with block_public_access=s3.BlockPublicAccess.BLOCK_ALL"),
], ids=["expires too soon", "archived too soon", "expires on a date", "public"])
def test_a_bucket_brought_that_would_lose_attachments_fails_synth_with_the_fix(props, rule_id, message):
    stack = make_stack()
    with pytest.raises(SendOnceConfigurationError) as error:
        build(stack, attachments_bucket=bucket_with(stack, **props))
    assert error.value.id == rule_id
    assert message in error.value.message


@pytest.mark.parametrize("rules", [
    [s3.LifecycleRule(id="Long", expiration=cdk.Duration.days(34))],
    [s3.LifecycleRule(id="Logs", prefix="logs/", expiration=cdk.Duration.days(1))],  # a prefix: not every object
    [s3.LifecycleRule(id="Off", enabled=False, expiration=cdk.Duration.days(1))],
    [s3.LifecycleRule(id="Cheap", transitions=[s3.Transition(storage_class=s3.StorageClass.INFREQUENT_ACCESS,
                                                             transition_after=cdk.Duration.days(30))])],
], ids=["long enough", "prefixed", "disabled", "readable class"])
def test_a_bucket_brought_that_keeps_attachments_long_enough_is_accepted(rules):
    stack = make_stack()
    bucket = bucket_with(stack, lifecycle_rules=rules)
    pipeline, template = build(stack, attachments_bucket=bucket)
    assert pipeline.attachments_bucket is bucket
    bucket_id = stack.get_logical_id(bucket.node.default_child)
    consumer = only(template, "AWS::Lambda::Function", Properties={"Environment": {"Variables": Match.object_like(
        {Env.ATTACHMENTS_BUCKET: {"Ref": bucket_id}})}})
    assert consumer  # the consumer reads its claim checks from the bucket brought


def test_a_longer_queue_retention_raises_what_a_bucket_brought_must_keep():
    stack = make_stack()
    bucket = bucket_with(stack, lifecycle_rules=[s3.LifecycleRule(id="Long", expiration=cdk.Duration.days(34))])
    with pytest.raises(SendOnceConfigurationError, match="expires objects after 34 days: a job can still be sent "
                                                         "71 days after"):
        build(stack, attachments_bucket=bucket, retention_period=cdk.Duration.days(14),
              dedupe_ttl=cdk.Duration.days(14))


def test_an_expiry_that_cannot_be_derived_at_synth_fails_for_a_bucket_to_make():
    stack = make_stack()
    days = cdk.CfnParameter(stack, "RetentionDays", type="Number").value_as_number
    with pytest.raises(SendOnceConfigurationError) as error:
        build(stack, attachments_bucket=True, retention_period=cdk.Duration.days(days))
    assert error.value.id == "SendOnce.AttachmentsExpiryUnknown"
    assert "give both as plain durations, or bring your own bucket" in error.value.message


def test_a_bucket_name_string_is_refused_with_the_types_allowed():
    with pytest.raises(SendOnceConfigurationError, match=re.escape(
            "attachments_bucket ('invoices', a str) must be a bool or an aws_s3.IBucket")):
        build(attachments_bucket="invoices")


# The queue's maximum message size, and one batch in one invocation.

def test_max_message_size_sets_the_queue_and_lets_the_dead_letter_queue_take_any_job():
    _, template = build(max_message_size_bytes=SQS_MAX_MESSAGE_BYTES, batch_size=5)
    assert queue_by_retention(template, 4 * DAY)["Properties"]["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES
    assert queue_by_retention(template, FOURTEEN_DAYS)["Properties"]["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES
    _, smaller = build(max_message_size_bytes=65_536)
    assert queue_by_retention(smaller, 4 * DAY)["Properties"]["MaximumMessageSize"] == 65_536
    assert queue_by_retention(smaller, FOURTEEN_DAYS)["Properties"]["MaximumMessageSize"] == SQS_MAX_MESSAGE_BYTES


def test_unset_the_job_queue_is_set_to_256_kib_in_the_template_and_its_dlq_keeps_sqs_default():
    """SQS's own default rose to 1 MiB in 2025: a job queue left to it would take batches no invocation can carry,
    so the template names 256 KiB; the DLQ keeps SQS's default, which is as large or larger."""
    _, template = build()
    assert queue_by_retention(template, 4 * DAY)["Properties"]["MaximumMessageSize"] == SQS_DEFAULT_MESSAGE_BYTES
    assert "MaximumMessageSize" not in queue_by_retention(template, FOURTEEN_DAYS)["Properties"]


@pytest.mark.parametrize(("props", "rule_id", "message"), [
    ({"max_message_size_bytes": SQS_MAX_MESSAGE_BYTES + 1}, "SendOnce.InvalidMaxMessageSize",
     "max_message_size_bytes (1048577) must be a whole number of bytes between 1024 and 1048576 (1 MiB), SQS's "
     "limits; leave it unset for the default 262144 (256 KiB), or give larger files through attachments_bucket"),
    ({"max_message_size_bytes": 512}, "SendOnce.InvalidMaxMessageSize", "max_message_size_bytes (512) must be"),
    ({"max_message_size_bytes": SQS_MAX_MESSAGE_BYTES}, "SendOnce.BatchPayloadTooLarge",
     "batch_size (10) x (max_message_size_bytes (1048576) + 1024 bytes of each record's envelope) = 10496000 bytes "
     "is more than Lambda's 6291456-byte (6 MB) invocation payload, which one batch from the queue must fit: a "
     "batch of the largest jobs could not reach the consumer in one invocation; lower batch_size to 5 or "
     "max_message_size_bytes to 628121 (files larger than a job should carry go through attachments_bucket)"),
    ({"batch_size": 50, "max_batching_window": cdk.Duration.seconds(5)}, "SendOnce.BatchPayloadTooLarge",
     "batch_size (50) x (max_message_size_bytes (262144, the default) + 1024 bytes of each record's envelope) = "
     "13158400 bytes is more than Lambda's 6291456-byte (6 MB) invocation payload"),
    ({"batch_size": 10_000, "max_batching_window": cdk.Duration.seconds(5)}, "SendOnce.BatchPayloadTooLarge",
     "lower batch_size to 23 (files"),
], ids=["above 1 MiB", "below 1 KiB", "1 MiB at batch 10", "batch 50 at the default", "batch 10000"])
def test_a_message_size_or_batch_that_cannot_fit_one_invocation_fails_synth_with_the_fix(props, rule_id, message):
    with pytest.raises(SendOnceConfigurationError) as error:
        build(**props)
    assert error.value.id == rule_id
    assert message in error.value.message


def test_the_largest_batch_the_rule_allows_fits_the_payload_and_one_more_does_not():
    record = SQS_MAX_MESSAGE_BYTES + SQS_RECORD_ENVELOPE_BYTES
    largest = LAMBDA_PAYLOAD_BYTES // record
    build(max_message_size_bytes=SQS_MAX_MESSAGE_BYTES, batch_size=largest)
    with pytest.raises(SendOnceConfigurationError, match="BatchPayloadTooLarge"):
        build(max_message_size_bytes=SQS_MAX_MESSAGE_BYTES, batch_size=largest + 1)


def test_a_dead_letter_queue_brought_must_take_the_largest_job():
    stack = make_stack()
    small = sqs.Queue(stack, "Dlq", retention_period=cdk.Duration.days(14), max_message_size_bytes=262_144)
    with pytest.raises(SendOnceConfigurationError) as error:
        build(stack, dead_letter_queue=small, max_message_size_bytes=524_288)
    assert error.value.id == "SendOnce.DeadLetterQueueMessageSize"
    assert error.value.message == (
        "dead_letter_queue takes messages of at most 262144 bytes, less than the job queue's max_message_size_bytes "
        "(524288): a large job could not be dead-lettered with its reason; create it with "
        "max_message_size_bytes=1048576")


# Security checks over the whole stack.

def everything_with_attachments() -> tuple[cdk.App, cdk.Stack]:
    app = cdk.App()
    stack = cdk.Stack(app, "Attachments")
    key = kms.Key(stack, "Key", enable_key_rotation=True)
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", attachments_bucket=True,
                                  encryption_key=key, max_message_size_bytes=SQS_MAX_MESSAGE_BYTES, batch_size=5)
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    pipeline.grant_attach(producer)
    return app, stack


@pytest.mark.parametrize("pack", [AwsSolutionsChecks, ServerlessChecks], ids=lambda p: p.__name__)
def test_cdk_nag_finds_nothing_unacknowledged_with_the_bucket(pack):
    app, stack = everything_with_attachments()
    report = pack(app).validate_scope(stack)
    assert report.violations == [] and report.success


def test_cfn_lint_finds_nothing_with_the_bucket():
    _, stack = everything_with_attachments()
    matches = lint(json.dumps(Template.from_stack(stack).to_json()), config=ManualArgs(regions=["us-east-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches] == []

