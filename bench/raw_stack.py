"""The same pipeline written with raw aws-cdk-lib, for the synth-time comparison (not a supported alternative)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs

from sendonce_contract.schema import Ledger


def raw_pipeline(stack: cdk.Stack, code_dir: str) -> None:
    dlq = sqs.Queue(stack, "Dlq", retention_period=cdk.Duration.days(14), enforce_ssl=True,
                    encryption=sqs.QueueEncryption.SQS_MANAGED)
    queue = sqs.Queue(stack, "Queue", visibility_timeout=cdk.Duration.seconds(180), enforce_ssl=True,
                      encryption=sqs.QueueEncryption.SQS_MANAGED,
                      dead_letter_queue=sqs.DeadLetterQueue(queue=dlq, max_receive_count=5))
    table = dynamodb.Table(stack, "Table", partition_key=dynamodb.Attribute(name="dedupeKey",
                                                                            type=dynamodb.AttributeType.STRING),
                           billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST, time_to_live_attribute=Ledger.EXPIRES_AT)
    log_group = logs.LogGroup(stack, "Logs", retention=logs.RetentionDays.ONE_MONTH)
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    log_group.grant_write(role)
    function = lambda_.Function(stack, "Consumer", code=lambda_.Code.from_asset(code_dir),
                                handler="sendonce_runtime.handler.handler", runtime=lambda_.Runtime.PYTHON_3_14,
                                architecture=lambda_.Architecture.ARM_64, timeout=cdk.Duration.seconds(30),
                                role=role, log_group=log_group)
    function.add_event_source(event_sources.SqsEventSource(queue, batch_size=10, report_batch_item_failures=True))
    table.grant(function, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")
    dlq.grant_send_messages(function)
    function.add_to_role_policy(iam.PolicyStatement(actions=["ses:SendEmail"], resources=[
        stack.format_arn(service="ses", resource="identity", resource_name="example.com")]))
    for name, metric in (("Dlq", dlq.metric_approximate_number_of_messages_visible()),
                         ("Age", queue.metric_approximate_age_of_oldest_message()),
                         ("Errors", function.metric_errors())):
        metric.create_alarm(stack, f"{name}Alarm", threshold=1, evaluation_periods=1,
                            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD)
