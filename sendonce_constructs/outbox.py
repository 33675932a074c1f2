"""The transactional outbox: a table written in the producer's own transaction, relayed to the job queue.

The relay is a small bundled function on the table's stream, not EventBridge Pipes: the relay sends the job's JSON
as the exact message body the consumer parses and sets FIFO group and deduplication ids from the key, and it can
be deployed and run against the local emulator (which cannot deploy a Pipe).
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.companion_configs import RelayConfig
from sendonce_contract.job_lifetime import DEAD_LETTER_RETENTION_S
from sendonce_contract.schema import OutboxItem

from .acknowledgements import acknowledge
from .bundled_function import BundledFunction, FunctionOptions
from .runtime_asset import RELAY_HANDLER


class Outbox(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        queue: sqs.IQueue,
        fifo: bool,
        function_options: FunctionOptions,
        encryption_key: kms.IKey | None,
        removal_policy: RemovalPolicy,
        urgent_queue: sqs.IQueue | None = None,
        key_secret: secretsmanager.ISecret | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=OutboxItem.KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            stream=dynamodb.StreamViewType.NEW_IMAGE,
            time_to_live_attribute=OutboxItem.EXPIRES_AT,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=removal_policy,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if encryption_key else None,
            encryption_key=encryption_key,
        )
        # Where a batch of stream records goes after the relay gave up on it: its stream position, for a replay.
        self.failures = sqs.Queue(
            self,
            "RelayFailures",
            retention_period=Duration.seconds(DEAD_LETTER_RETENTION_S),
            encryption=sqs.QueueEncryption.KMS if encryption_key else sqs.QueueEncryption.SQS_MANAGED,
            encryption_master_key=encryption_key,
            enforce_ssl=True,
        )
        acknowledge(self.failures, "AwsSolutions-SQS3",
                    "This queue is the relay's on-failure destination: it is the end of the line, like a DLQ.")
        acknowledge(self.failures, "Serverless-SQSRedrivePolicy",
                    "This queue is the relay's on-failure destination: a queue behind it would hide failures.")
        relay = BundledFunction(
            self, "Relay", handler=RELAY_HANDLER, timeout=Duration.seconds(30), options=function_options,
            environment=RelayConfig(queue.queue_url, fifo,
                                    urgent_queue.queue_url if urgent_queue is not None else None,
                                    key_secret.secret_arn if key_secret is not None else None).to_env(),
            invoked_by="its stream event source",
            description="sendonce outbox relay: moves outbox jobs from the table's stream to the job queue",
            role_description="sendonce outbox relay: its stream, the job queue, its log group",
        )
        self.relay, self.role, self.log_group = relay.function, relay.role, relay.log_group
        self.relay.add_event_source(event_sources.DynamoEventSource(
            self.table,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=100,
            bisect_batch_on_error=True,
            retry_attempts=10,
            report_batch_item_failures=True,
            filters=[lambda_.FilterCriteria.filter({"eventName": lambda_.FilterRule.is_equal("INSERT")})],
            on_failure=event_sources.SqsDlq(self.failures),
        ))
        queue.grant_send_messages(self.relay)
        if urgent_queue is not None:  # urgent jobs go to the urgent lane
            urgent_queue.grant_send_messages(self.relay)
        if key_secret is not None:  # with key_privacy a job's tenant is relayed as its digest
            key_secret.grant_read(self.relay)
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]",
                    "The stream event source's dynamodb:ListStreams has no resource-level permission; reading the "
                    "stream itself is granted on this table's stream ARN only (and X-Ray's, when tracing is on, "
                    "have none at all).")

    def grant_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """What ``outbox_put`` needs inside a TransactWriteItems: UpdateItem (the default, which never overwrites)
        and PutItem (``fail_if_exists``) on the outbox table, and its KMS key."""
        grant = self.table.grant(grantee, "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem")
        if self.table.encryption_key is None:
            return grant
        return grant.combine(self.table.encryption_key.grant_encrypt_decrypt(grantee))
