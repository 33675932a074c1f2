"""The props people reach for in their first week: each reaches its resources, and a wrong one fails synth."""

from __future__ import annotations

import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from construct_support import actions_of, build, make_stack, only, pipeline_resources

from sendonce_constructs import SendOnceConfigurationError, SendOnceEmailQueue


def imported_vpc(stack: cdk.Stack) -> ec2.IVpc:
    return ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-1234", availability_zones=["us-east-1a", "us-east-1b"],
                                       private_subnet_ids=["subnet-a", "subnet-b"])


def functions(template: Template) -> list[dict]:
    return [f["Properties"] for f in template.find_resources("AWS::Lambda::Function").values()]


def test_a_vpc_places_every_bundled_function_in_it_and_stays_cdk_nag_clean():
    stack = make_stack()
    vpc = imported_vpc(stack)
    group = ec2.SecurityGroup(stack, "Egress", vpc=vpc, allow_all_outbound=True)
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", vpc=vpc, security_groups=[group], outbox=True)
    template = Template.from_stack(stack)
    configs = [f["VpcConfig"] for f in functions(template)]
    # the consumer, the outbox relay, the SES event recorder, the outcome publisher, the quota watch, the schedule
    # watch
    assert len(configs) == 6
    assert all(c["SubnetIds"] == ["subnet-a", "subnet-b"] for c in configs)
    assert all(c["SecurityGroupIds"] == [{"Fn::GetAtt": [stack.get_logical_id(group.node.default_child),
                                                         "GroupId"]}] for c in configs)
    for pack in (AwsSolutionsChecks, ServerlessChecks):
        report = pack(stack.node.root).validate_scope(stack)
        assert report.violations == [] and report.success


@pytest.mark.parametrize(("props", "message"), [
    ({"vpc_subnets": ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)},
     "vpc_subnets given without vpc"),
    ({"reserved_concurrent_executions": 3, "max_concurrency": 5},
     "reserved_concurrent_executions (3) is below max_concurrency (5)"),
    ({"reserved_concurrent_executions": 0}, "reserved_concurrent_executions (0) must be at least 1"),
], ids=["subnets without vpc", "reserved below max_concurrency", "reserved zero"])
def test_props_that_cannot_work_fail_synth_with_the_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)


def test_reserved_concurrency_and_the_log_level_reach_the_functions():
    _, template = build(reserved_concurrent_executions=8, max_concurrency=5,
                        log_level=lambda_.ApplicationLogLevel.DEBUG)
    consumer = only(template, "AWS::Lambda::Function")["Properties"]
    assert consumer["ReservedConcurrentExecutions"] == 8
    assert {f["LoggingConfig"]["ApplicationLogLevel"] for f in functions(template)} == {"DEBUG"}


def test_queues_are_kept_when_the_stack_is_deleted_unless_told_otherwise():
    _, template = build()
    queues = pipeline_resources(template, "AWS::SQS::Queue")
    assert {q["DeletionPolicy"] for q in queues.values()} == {"Retain"}
    _, template = build(queue_removal_policy=cdk.RemovalPolicy.DESTROY, log_removal_policy=cdk.RemovalPolicy.RETAIN)
    assert {q["DeletionPolicy"] for q in pipeline_resources(template, "AWS::SQS::Queue").values()} == {"Delete"}
    assert {g["DeletionPolicy"] for g in template.find_resources("AWS::Logs::LogGroup").values()} == {"Retain"}


def test_the_event_source_can_be_switched_off_without_deleting_anything():
    _, template = build(enabled=False)
    assert only(template, "AWS::Lambda::EventSourceMapping")["Properties"]["Enabled"] is False


def test_a_dead_letter_queue_of_ones_own_is_used_and_none_is_made():
    stack = make_stack()
    mine = sqs.Queue(stack, "MyDlq", retention_period=cdk.Duration.days(14), enforce_ssl=True)
    pipeline, template = build(stack, dead_letter_queue=mine)
    assert pipeline.dead_letter_queue is mine
    assert not any(name.startswith("ReceiptsDeadLetterQueue")
                   for name in template.find_resources("AWS::SQS::Queue"))
    redrive = only(template, "AWS::SQS::Queue", Properties={"RedrivePolicy": {"maxReceiveCount": 5}})
    assert redrive["Properties"]["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0].startswith("MyDlq")


def test_a_dead_letter_queue_of_another_kind_fails_synth():
    stack = make_stack()
    fifo = sqs.Queue(stack, "MyDlq", fifo=True)
    with pytest.raises(SendOnceConfigurationError, match="dead_letter_queue is a FIFO queue while fifo is False"):
        build(stack, dead_letter_queue=fifo)


def test_grant_operate_gives_what_the_sendonce_command_needs():
    stack = make_stack()
    operator = iam.Role(stack, "Operator", assumed_by=iam.AccountRootPrincipal())
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    grant = pipeline.grant_operate(operator)
    assert isinstance(grant, iam.Grant) and grant.success
    template = Template.from_stack(stack)
    statements = [s for name, p in template.find_resources("AWS::IAM::Policy").items()
                  if name.startswith("OperatorDefaultPolicy") for s in p["Properties"]["PolicyDocument"]["Statement"]]
    actions = actions_of(statements)
    assert {"dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
            "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:StartMessageMoveTask", "sqs:SendMessage",
            "cloudformation:DescribeStacks", "cloudformation:DescribeStackResources"} <= actions
    assert not any(s["Resource"] == "*" for s in statements)
