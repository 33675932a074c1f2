"""The quota watch: a small bundled function an EventBridge schedule runs, which reads SESv2 GetAccount and
publishes ``QuotaUsedPercent``, so an alarm warns before SES's 24-hour quota runs out (the consumer never calls
GetAccount on the send path)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sendonce_contract.companion_configs import QuotaWatchConfig

from . import ses_permissions
from .acknowledgements import acknowledge
from .bundled_function import BundledFunction, FunctionOptions
from .runtime_asset import QUOTA_WATCH_HANDLER

QUOTA_WATCH_EVERY = Duration.minutes(5)


@dataclass(frozen=True)
class QuotaWatch:
    function: lambda_.IFunction
    schedule: events.Rule


def build_quota_watch(scope: Construct, pipeline_name: str, options: FunctionOptions) -> QuotaWatch:
    built = BundledFunction(
        scope, "QuotaWatch", handler=QUOTA_WATCH_HANDLER,
        description=f"sendonce {pipeline_name}: reads SES's 24-hour sending quota and publishes QuotaUsedPercent",
        role_description="sendonce quota watch: ses:GetAccount and its own log group",
        timeout=Duration.seconds(30), environment=QuotaWatchConfig(pipeline_name).to_env(), options=options,
        invoked_by="its EventBridge schedule", memory_size=128,
    )
    built.role.add_to_principal_policy(ses_permissions.account_read_statement())
    acknowledge(built.role, "AwsSolutions-IAM5[Resource::*]", ses_permissions.ACCOUNT_READ_REASON)
    schedule = events.Rule(scope, "QuotaWatchSchedule", schedule=events.Schedule.rate(QUOTA_WATCH_EVERY),
                           description=f"sendonce {pipeline_name}: the quota watch, every five minutes",
                           targets=[targets.LambdaFunction(built.function, retry_attempts=0)])
    acknowledge(schedule, "Serverless-EventBusDLQ",
                "A missed reading is replaced by the next one five minutes later: nothing to keep.")
    return QuotaWatch(built.function, schedule)
