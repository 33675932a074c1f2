"""What `SendOnceEmailQueue(self, "Receipts", sender="example.com")` deploys, and every override."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ses as ses
from aws_cdk.assertions import Template
from construct_support import (
    actions_of,
    build,
    make_stack,
    only,
    pipeline_resources,
    policy_statements,
    queue_by_retention,
    ses_statement,
    statement_actions,
)

from sendonce_constructs import DeliveryPolicy, SendOnceEmailQueue
from sendonce_constructs.props import newest_python_runtime
from sendonce_contract.deploy_config import Env

FOUR_DAYS, FOURTEEN_DAYS = 4 * 86_400, 14 * 86_400


def test_job_queue_defaults_follow_the_aws_guidance():
    _, template = build()
    queue = queue_by_retention(template, FOUR_DAYS)["Properties"]
    assert queue["VisibilityTimeout"] == 180  # 6 x the 30 s function timeout
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5


def test_dead_letter_queue_keeps_messages_fourteen_days_encrypted():
    _, template = build()
    assert queue_by_retention(template, FOURTEEN_DAYS)["Properties"]["SqsManagedSseEnabled"] is True


def test_every_queue_refuses_requests_without_tls():
    _, template = build()
    policies = template.find_resources("AWS::SQS::QueuePolicy")
    assert len(policies) == 5  # the job queue and its DLQ, the SES evidence queue and its DLQ, outcome failures
    for policy in policies.values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        assert {"Bool": {"aws:SecureTransport": "false"}} in [s.get("Condition") for s in statements
                                                               if s["Effect"] == "Deny"]


def test_dedupe_table_is_on_demand_with_ttl_pitr_and_retained():
    _, template = build()
    table = only(template, "AWS::DynamoDB::Table")
    assert table["DeletionPolicy"] == "Retain"
    props = table["Properties"]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["KeySchema"] == [{"AttributeName": "dedupeKey", "KeyType": "HASH"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}


def test_consumer_function_defaults():
    pipeline, template = build()
    props = only(template, "AWS::Lambda::Function")["Properties"]
    assert props["Handler"] == "sendonce_runtime.handler.handler"
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == newest_python_runtime().name == "python3.14"
    assert props["Timeout"] == 30
    assert props["MemorySize"] == 256
    assert props["LoggingConfig"]["LogGroup"]["Ref"].startswith("ReceiptsConsumerLogs")
    env = props["Environment"]["Variables"]
    assert env[Env.TABLE_NAME]["Ref"].startswith("ReceiptsDedupeTable")
    assert env[Env.DLQ_URL]["Ref"].startswith("ReceiptsDeadLetterQueue")
    assert env[Env.WAITING_ROOM_TABLE]["Ref"].startswith("ReceiptsWaitingRoomTable")
    assert {k: v for k, v in env.items() if k not in (Env.TABLE_NAME, Env.DLQ_URL, Env.WAITING_ROOM_TABLE)} == {
        Env.DELIVERY: "resend-without-evidence",
        Env.DEDUPE_TTL_SECONDS: str(7 * 86_400),
        Env.PARALLELISM: "10",
        Env.FIFO: "false",
        Env.PIPELINE_NAME: "Test/Receipts",
        Env.SES_CONNECT_TIMEOUT_S: "2",
        Env.SES_READ_TIMEOUT_S: "5",
        Env.LEDGER_BUDGET_MS: "6000",
        Env.MAX_RECEIVE_COUNT: "5",
        Env.LEASE_MARGIN_MS: "10000",
        Env.CONFIGURATION_SET: {"Ref": "ReceiptsSesEvidenceConfigurationSetA0A72AAC"},
        Env.EVIDENCE_GRACE_MS: "300000",
        Env.PIPELINE_TAG: pipeline.node.addr,
        Env.OUTCOME_BUS: "default",
        Env.QUEUE_URL: {"Ref": "ReceiptsQueue4CA61331"},
        Env.SENDER_IDENTITY: "example.com",  # SES refusing it as unverified is the pipeline's stop, not the job's
        Env.QUEUE_RETENTION_S: str(4 * 86_400),  # a job parked this long goes to the DLQ (ses-paused)
    }


def test_a_short_function_timeout_shrinks_the_consumers_time_budget_to_fit():
    _, template = build(function_timeout=cdk.Duration.seconds(4))
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    connect, read = float(env[Env.SES_CONNECT_TIMEOUT_S]), float(env[Env.SES_READ_TIMEOUT_S])
    ledger_s, margin_s = int(env[Env.LEDGER_BUDGET_MS]) / 1000, int(env[Env.LEASE_MARGIN_MS]) / 1000
    assert connect + read + ledger_s < 4  # a record can start and finish inside one invocation
    assert 4 + margin_s < 6 * 4  # a dead worker's lease has expired when SQS redelivers its message


def test_consumer_has_its_own_log_group_with_a_retention():
    _, template = build()
    assert only(template, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 30


def test_event_source_reports_partial_batch_failures():
    _, template = build()
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    assert "MaximumBatchingWindowInSeconds" not in mapping
    assert "ScalingConfig" not in mapping


def test_consumer_gets_only_the_dynamodb_item_writes_it_makes():
    _, template = build()
    [statement] = [s for s in policy_statements(template) if any(a.startswith("dynamodb:") for a in s["Action"])
                   and "ReceiptsDedupeTable" in str(s["Resource"])]
    assert sorted(statement["Action"]) == ["dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"]


def test_a_paced_consumer_gets_the_same_dedupe_table_writes_and_nothing_more():
    # Pacing is a bucket in the instance's memory: it reads and writes nothing.
    pipeline, template = build(send_rate=5, max_concurrency=5)
    table_id = cdk.Stack.of(pipeline).get_logical_id(pipeline.table.node.default_child)
    dedupe = [s for s in policy_statements(template) if table_id in str(s["Resource"])]
    assert actions_of(dedupe) == {"dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
    assert "dynamodb:Scan" not in str(policy_statements(template))


def test_consumer_may_send_to_its_dlq_and_its_own_queue_only():
    _, template = build()
    sends = [s for s in policy_statements(template) if "sqs:SendMessage" in s["Action"]]
    # The DLQ for poison messages; the job queue for a throttled job's delayed copy.
    assert sorted(s["Resource"]["Fn::GetAtt"][0][:-8] for s in sends) == ["ReceiptsDeadLetterQueue", "ReceiptsQueue"]


def test_function_timeout_and_batching_window_set_the_visibility_timeout():
    _, template = build(function_timeout=cdk.Duration.seconds(60), max_batching_window=cdk.Duration.seconds(20))
    assert queue_by_retention(template, FOUR_DAYS)["Properties"]["VisibilityTimeout"] == 380
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["MaximumBatchingWindowInSeconds"] == 20


def test_overrides_reach_the_resources():
    _, template = build(
        memory_size=512,
        architecture=lambda_.Architecture.X86_64,
        runtime=lambda_.Runtime.PYTHON_3_12,
        log_retention=logs.RetentionDays.ONE_WEEK,
        batch_size=5,
        max_concurrency=3,
        parallelism=2,
        max_send_rate=14,
        max_receive_count=8,
        retention_period=cdk.Duration.days(2),
        dedupe_ttl=cdk.Duration.days(3),
        visibility_timeout=cdk.Duration.minutes(10),
        delivery=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE,
    )
    function = only(template, "AWS::Lambda::Function")["Properties"]
    assert (function["MemorySize"], function["Architectures"], function["Runtime"]) == (512, ["x86_64"], "python3.12")
    env = function["Environment"]["Variables"]
    assert env[Env.DELIVERY] == "resend-without-evidence"
    assert env[Env.DEDUPE_TTL_SECONDS] == str(3 * 86_400)
    assert env[Env.PARALLELISM] == "2"
    assert env[Env.MAX_SEND_RATE] == "14"
    mapping = only(template, "AWS::Lambda::EventSourceMapping")["Properties"]
    assert mapping["BatchSize"] == 5
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 3}
    queue = queue_by_retention(template, 2 * 86_400)["Properties"]
    assert queue["VisibilityTimeout"] == 600
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 8
    assert only(template, "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"] == 7


def test_fifo_makes_both_queues_fifo_and_tells_the_consumer():
    _, template = build(fifo=True)
    queues = pipeline_resources(template, "AWS::SQS::Queue")
    assert [q["Properties"].get("FifoQueue") for q in queues.values()] == [True, True]
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env[Env.FIFO] == "true"


def test_existing_table_is_used_and_none_is_made():
    stack = make_stack()
    table = dynamodb.Table.from_table_name(stack, "Mine", "my-dedupe-table")
    pipeline, template = build(stack, existing_table=table)
    assert pipeline_resources(template, "AWS::DynamoDB::Table") == {}  # the waiting room's is its own
    assert pipeline.table is table
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env[Env.TABLE_NAME] == "my-dedupe-table"


def test_removal_policy_and_deletion_protection_shape_the_table():
    _, template = build(removal_policy=cdk.RemovalPolicy.DESTROY, deletion_protection=True)
    table = only(template, "AWS::DynamoDB::Table")
    assert table["DeletionPolicy"] == "Delete"
    assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_customer_managed_key_encrypts_queues_and_table_and_is_granted():
    stack = make_stack()
    key = kms.Key(stack, "Key")
    _pipeline, template = build(stack, encryption_key=key)
    for queue in template.find_resources("AWS::SQS::Queue").values():
        assert "KmsMasterKeyId" in queue["Properties"]
    assert only(template, "AWS::DynamoDB::Table")["Properties"]["SSESpecification"]["SSEEnabled"] is True
    assert any("kms:Decrypt" in s["Action"] for s in policy_statements(template))


def key_actions_granted_on(template: Template, key_logical_prefix: str) -> set[str]:
    return {
        action
        for statement in policy_statements(template)
        if key_logical_prefix in str(statement["Resource"])
        for action in statement_actions(statement)
    }


@pytest.mark.parametrize("how", ["defined in the app", "imported with its key"])
def test_an_existing_tables_own_key_is_granted_to_the_consumer(how):
    stack = make_stack()
    key = kms.Key(stack, "TableKey")
    if how == "defined in the app":
        table = dynamodb.Table(stack, "Mine", partition_key=dynamodb.Attribute(
            name="dedupeKey", type=dynamodb.AttributeType.STRING),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED, encryption_key=key)
    else:
        table = dynamodb.Table.from_table_attributes(stack, "Mine", table_name="mine", encryption_key=key)
    _, template = build(stack, existing_table=table)
    assert {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"} <= key_actions_granted_on(template, "TableKey")


def test_the_tables_key_is_granted_once_when_it_is_the_encryption_key():
    stack = make_stack()
    key = kms.Key(stack, "Key")
    _, template = build(stack, encryption_key=key)
    kms_statements = [s for s in policy_statements(template) if "kms:Encrypt" in s["Action"]]
    assert len(kms_statements) == 1


def test_grant_enqueue_gives_a_producer_send_and_the_kms_it_needs():
    stack = make_stack()
    key = kms.Key(stack, "Key")
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", encryption_key=key)
    grant = pipeline.grant_enqueue(producer)
    assert isinstance(grant, iam.Grant) and grant.success
    template = Template.from_stack(stack)
    actions = {
        action
        for name, policy in template.find_resources("AWS::IAM::Policy").items()
        if name.startswith("ProducerDefaultPolicy")
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        for action in statement_actions(statement)
    }
    assert {"sqs:SendMessage", "kms:GenerateDataKey*", "kms:Encrypt"} <= actions


def test_public_attributes_are_the_resources_made():
    pipeline, _ = build()
    assert {type(pipeline.queue).__name__, type(pipeline.dead_letter_queue).__name__} == {"Queue"}
    assert type(pipeline.table).__name__ == "Table"
    assert type(pipeline.function).__name__ == "Function"
    assert type(pipeline.event_source).__name__ == "SqsEventSource"
    assert pipeline.queue.dead_letter_queue.queue is pipeline.dead_letter_queue


def test_ses_grant_names_the_identity_with_a_from_address_condition_and_no_wildcard():
    _, template = build(sender="example.com", from_addresses=["receipts@example.com"])
    statement = ses_statement(template)
    assert statement["Action"] == "ses:SendEmail"
    identity, configuration_set = statement["Resource"]  # the identity, and the set SES's events come through
    assert identity["Fn::Join"][1][-1] == ":identity/example.com"
    assert configuration_set["Fn::Join"][1][-2:] == [
        ":configuration-set/", {"Ref": "ReceiptsSesEvidenceConfigurationSetA0A72AAC"}]
    assert statement["Condition"] == {"StringLike": {"ses:FromAddress": ["receipts@example.com"]}}
    for s in policy_statements(template):
        assert s["Resource"] != "*"


def test_raw_messages_add_send_raw_email_only_when_allowed():
    _, template = build(allow_raw_messages=True)
    assert sorted(ses_statement(template)["Action"]) == ["ses:SendEmail", "ses:SendRawEmail"]


def test_ses_grant_without_from_addresses_allows_only_the_identitys_own_addresses():
    _, domain = build(sender="example.com")
    _, address = build(sender="receipts@example.com")
    assert ses_statement(domain)["Condition"] == {"StringLike": {"ses:FromAddress": ["*@example.com"]}}
    assert ses_statement(address)["Condition"] == {"StringLike": {"ses:FromAddress": ["receipts@example.com"]}}


def test_configuration_set_and_templates_are_granted_and_passed_on():
    _, template = build(configuration_set="transactional", template_names=["receipt"])
    resources = ses_statement(template)["Resource"]
    tails = [r["Fn::Join"][1][-1] for r in resources]
    assert tails == [":identity/example.com", ":configuration-set/transactional", ":template/receipt"]
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env[Env.CONFIGURATION_SET] == "transactional"


def test_an_email_identity_construct_can_be_the_sender():
    stack = make_stack()
    identity = ses.EmailIdentity(stack, "Identity", identity=ses.Identity.domain("example.com"))
    _, template = build(stack, sender=identity, from_addresses=["receipts@example.com"])
    statement = ses_statement(template)
    parts = statement["Resource"][0]["Fn::Join"][1]
    assert parts[-2:] == [":identity/", {"Ref": stack.get_logical_id(identity.node.default_child)}]
    assert statement["Condition"] == {"StringLike": {"ses:FromAddress": ["receipts@example.com"]}}


def test_logical_ids_are_pinned():
    # Renaming a child replaces the resource on deploy: the queue's messages or the table's keys would be lost.
    _, template = build()
    ids = {
        kind: sorted(template.find_resources(kind))
        for kind in ("AWS::SQS::Queue", "AWS::DynamoDB::Table", "AWS::Lambda::Function")
    }
    assert ids == {
        "AWS::SQS::Queue": ["ReceiptsDeadLetterQueue2FBEE237", "ReceiptsOutcomeEventsFailures401EEFE5",
                            "ReceiptsQueue4CA61331", "ReceiptsSesEvidenceDeadLetterQueueD25CC1D6",
                            "ReceiptsSesEvidenceQueue73BD6BE9"],
        "AWS::DynamoDB::Table": ["ReceiptsDedupeTable97CEC35F", "ReceiptsWaitingRoomTableB30F750C"],
        "AWS::Lambda::Function": ["ReceiptsConsumer2A19002C", "ReceiptsOutcomeEventsPublisherF6800E42",
                                  "ReceiptsQuotaWatch682AFD25", "ReceiptsSesEvidenceRecorder8527EFB3",
                                  "ReceiptsWaitingRoomScheduleWatchF0FD2FE4"],
    }
    # A paced pipeline, with lanes too, has the dedupe table and the waiting room only: the pace table of 0.2 is
    # gone (CHANGELOG), and its consumers touch no table but the ledger and the room.
    _, paced = build(send_rate=5, max_concurrency=5, urgent_lane=True)
    assert sorted(paced.find_resources("AWS::DynamoDB::Table")) == ["ReceiptsDedupeTable97CEC35F",
                                                                    "ReceiptsWaitingRoomTableB30F750C"]
    assert all("SENDONCE_PACE_TABLE" not in function["Properties"].get("Environment", {}).get("Variables", {})
               for function in paced.find_resources("AWS::Lambda::Function").values())
    # The attachments bucket: renaming it would leave behind the objects jobs still name.
    _, with_bucket = build(attachments_bucket=True)
    assert sorted(with_bucket.find_resources("AWS::S3::Bucket")) == ["ReceiptsAttachmentsBucketEB0EC85B"]


def test_outputs_publish_the_table_and_queues_for_the_operator_command():
    _, template = build()
    outputs = template.to_json()["Outputs"]
    ours = [o for o in outputs.values() if o["Description"].startswith("sendonce:")]
    by_part = {o["Description"].rsplit(":", 1)[-1]: o for o in ours}
    # and "key-secret" with key_privacy, "outbox" with an outbox
    assert set(by_part) == {"table", "queue", "dlq", "dedupe-ttl", "evidence-grace"}
    assert all(o["Description"].startswith("sendonce:Test/Receipts:") for o in by_part.values())
    assert by_part["table"]["Value"]["Ref"].startswith("ReceiptsDedupeTable")
    assert by_part["dedupe-ttl"]["Value"] == "604800"  # what `dlq redrive` compares a dead letter's age with
    assert by_part["evidence-grace"]["Value"] == "300"  # what `sendonce latency` weighs the events' delays against
    _, without_events = build(ses_events=False)
    assert not [o for o in without_events.to_json()["Outputs"].values() if o["Description"].endswith(":evidence-grace")]


def test_outbox_adds_a_streamed_table_and_a_relay_to_the_job_queue():
    stack = make_stack()
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", outbox=True)
    grant = pipeline.grant_outbox_write(producer)
    template = Template.from_stack(stack)
    tables = template.find_resources("AWS::DynamoDB::Table")
    [outbox] = [t for name, t in tables.items() if name.startswith("ReceiptsOutboxTable")]
    assert outbox["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    assert outbox["DeletionPolicy"] == "Retain"
    [relay] = [f for f in template.find_resources("AWS::Lambda::Function").values()
               if f["Properties"]["Handler"] == "sendonce_runtime.outbox_relay.handler"]
    assert relay["Properties"]["Environment"]["Variables"][Env.QUEUE_URL]["Ref"].startswith("ReceiptsQueue")
    [mapping] = [m["Properties"] for name, m in template.find_resources("AWS::Lambda::EventSourceMapping").items()
                 if "StartingPosition" in m["Properties"] and name.startswith("ReceiptsOutboxRelay")]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert "OnFailure" in mapping["DestinationConfig"]
    assert mapping["FilterCriteria"] == {"Filters": [{"Pattern": '{"eventName":["INSERT"]}'}]}
    assert grant.success and pipeline.outbox_table is pipeline.outbox.table
    producer_actions = actions_of([s for s in policy_statements(template) if "ConditionCheckItem" in str(s["Action"])])
    assert producer_actions == {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
    outputs = template.to_json()["Outputs"]
    assert any(o["Description"] == "sendonce:Test/Receipts:outbox" for o in outputs.values())


def test_outbox_raises_the_default_dedupe_ttl_past_stream_queue_and_dlq_retention():
    _, template = build(outbox=True)
    env = next(f for f in template.find_resources("AWS::Lambda::Function").values()
               if f["Properties"]["Handler"] == "sendonce_runtime.handler.handler")["Properties"]["Environment"]
    assert env["Variables"][Env.DEDUPE_TTL_SECONDS] == str(19 * 86_400)  # 1 + 4 + 14 days


def test_grant_outbox_write_without_an_outbox_is_an_error():
    pipeline, _ = build()
    with pytest.raises(ValueError, match="needs outbox=True"):
        pipeline.grant_outbox_write(iam.Role(make_stack(), "R", assumed_by=iam.AccountRootPrincipal()))


def test_the_outbox_write_grant_includes_the_customer_key():
    stack = make_stack()
    producer = iam.Role(stack, "Producer", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    key = kms.Key(stack, "Key")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com", outbox=True, encryption_key=key)
    grant = pipeline.grant_outbox_write(producer)
    assert grant.success
    kms_statements = [s for s in grant.principal_statements if any(a.startswith("kms:") for a in s.actions)]
    assert kms_statements, "the grant returned leaves out the KMS key it granted"
