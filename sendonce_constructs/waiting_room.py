"""The waiting room (on a standard queue): a table of the pipeline's own where a job scheduled beyond SQS's longest
delay, or parked while SES stops sending, waits at a fixed cost, and the schedule watch, a small function an
EventBridge schedule runs each minute, which sends each job back to its lane's queue shortly before its sendAt, or
once SES says it sends again (``sendonce_contract.waiting_room``)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.stack_names import ChildId
from sendonce_contract.waiting_room import DUE, ROOM, WATCH_EVERY_S, ScheduleWatchConfig

from . import ses_permissions
from .acknowledgements import acknowledge, wildcard_resource_finding
from .bundled_function import BundledFunction, FunctionOptions
from .runtime_asset import SCHEDULE_WATCH_HANDLER

# A run reads and sends back at most what one minute brought due (a page at a time, stopping with time to spare).
WATCH_TIMEOUT = Duration.seconds(50)


@dataclass(frozen=True)
class SesStopsWatched:
    """What the watch reads to end SES's stops: the lanes' stop items in the dedupe table, and what SES is asked."""

    ledger_table: dynamodb.ITable
    sender_identity: str
    sender_identity_arn: str
    configuration_set_name: str | None
    ses_tenants: bool


class WaitingRoom(Construct):
    def __init__(self, scope: Construct, pipeline_name: str, *, queue: sqs.IQueue, dead_letter_queue: sqs.IQueue,
                 urgent_queue: sqs.IQueue | None, urgent_dead_letter_queue: sqs.IQueue | None,
                 options: FunctionOptions, encryption_key: kms.IKey | None, removal_policy: RemovalPolicy | None,
                 deletion_protection: bool | None, stops: SesStopsWatched) -> None:
        super().__init__(scope, ChildId.WAITING_ROOM)
        self.table = dynamodb.Table(
            self, "Table",
            partition_key=dynamodb.Attribute(name=ROOM, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=DUE, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            removal_policy=removal_policy, deletion_protection=deletion_protection,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if encryption_key else None,
            encryption_key=encryption_key,
        )
        watch = BundledFunction(
            self, ChildId.SCHEDULE_WATCH, handler=SCHEDULE_WATCH_HANDLER,
            description=f"sendonce {pipeline_name}: sends waiting jobs back: at sendAt, or once SES sends again",
            role_description="sendonce schedule watch: its waiting room, its pipeline's job queues and stop items, "
                             "SES's status, its logs",
            # Two runs at once (one slow past a minute) send the same jobs back: the ledger sends each once.
            timeout=WATCH_TIMEOUT, options=options, invoked_by="its EventBridge schedule", memory_size=128,
            environment=ScheduleWatchConfig(
                self.table.table_name, queue.queue_url, urgent_queue.queue_url if urgent_queue is not None else None,
                pipeline_name, dead_letter_queue.queue_url,
                urgent_dead_letter_queue.queue_url if urgent_dead_letter_queue is not None else None,
                stops.ledger_table.table_name, stops.sender_identity, stops.configuration_set_name).to_env(),
        )
        self.function, self.role, self.log_group = watch.function, watch.role, watch.log_group
        self.table.grant(self.function, "dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem",
                         "dynamodb:DeleteItem")
        self._grant_stops(stops)
        for lane_queue in (queue, dead_letter_queue, urgent_queue, urgent_dead_letter_queue):
            if lane_queue is not None:
                lane_queue.grant_send_messages(self.function)
        self.schedule = events.Rule(
            self, "Schedule", schedule=events.Schedule.rate(Duration.minutes(WATCH_EVERY_S // 60)),
            description=f"sendonce {pipeline_name}: the schedule watch, every minute",
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)])
        acknowledge(self.schedule, "Serverless-EventBusDLQ",
                    "A missed run is made up by the next one a minute later: the jobs stay in the room until sent.")

    def _grant_stops(self, stops: SesStopsWatched) -> None:
        """A lane's stop item read and marked over; SES asked whether a stop is over."""
        stops.ledger_table.grant(self.function, "dynamodb:GetItem", "dynamodb:UpdateItem")
        self.role.add_to_principal_policy(ses_permissions.account_read_statement())
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", ses_permissions.ACCOUNT_READ_REASON)
        stack = Stack.of(self)
        self.role.add_to_principal_policy(iam.PolicyStatement(actions=["ses:GetEmailIdentity"],
                                                              resources=[stops.sender_identity_arn]))
        if stops.configuration_set_name is not None:
            self.role.add_to_principal_policy(iam.PolicyStatement(
                actions=["ses:GetConfigurationSet"],
                resources=[ses_permissions.configuration_set_arn(stack, stops.configuration_set_name)]))
        if stops.ses_tenants:  # a tenant's stop: its GetTenant
            self.role.add_to_principal_policy(ses_permissions.tenant_status_statement(stack))
            acknowledge(self.role, wildcard_resource_finding(stack, ses_permissions.any_tenant_arn(stack)),
                        "ses_tenants: a stopped tenant is named at run time; SES's tenant ARNs end in an id SES "
                        "assigns, so no tenant can be named at synth. Only this account's tenants in this region.")

    def grant_admit(self, grantee: iam.IGrantable) -> None:
        """A consumer writes a scheduled job into the room, and a parked batch with its stop's marker."""
        self.table.grant(grantee, "dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem")

    def alarms(self, topic: sns.ITopic | None, left: cloudwatch.IMetric) -> dict[str, cloudwatch.Alarm]:
        """The watch failing its runs, and jobs left due in the room run after run (``left``: ScheduledLeft)."""
        found = {
            "ScheduleWatchErrors": cloudwatch.Alarm(
                self, "ErrorsAlarm",
                metric=self.function.metric_errors(period=Duration.minutes(5), statistic="Sum"),
                threshold=3, evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description="The schedule watch failed three runs in five minutes: scheduled jobs stay in "
                                  "the waiting room past their sendAt (none is lost; each goes once a run succeeds)."),
            "ScheduledJobsLeft": cloudwatch.Alarm(
                self, "LeftAlarm", metric=left, threshold=1, evaluation_periods=3,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                alarm_description="Scheduled jobs due stayed in the waiting room through every run of 15 minutes: "
                                  "SQS refused them for other than what they are (access, a key), or the watch "
                                  "has more due than a run reaches. Its log lines say which."),
        }
        if topic is not None:
            for alarm in found.values():
                alarm.add_alarm_action(actions.SnsAction(topic))
        return found
