"""What the demo knows of the example app (examples/app.py), and its deploy to the emulator.

Its parts are found as a user's tools find them: the stack loaded as `sendonce-local run` loads it (its functions
told apart by the runtime's entry points), the pipeline's table and outbox through the stack's outputs as the
operator command reads them (``sendonce --stack``; the contract's child ids where a stack has no outputs), and the
app's own queue through the output the app declares.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.priority import Priority
from sendonce_ops.locate import locate
from sendonce_runtime.entry_points import HANDLER, OUTCOME_HANDLER, RECORDER_HANDLER

from ..emulator.server import LocalAws
from ..lambda_service.deployed_stack import DeployedConsumer, DeployedStreamFunction
from ..lambda_service.schedule_source import DeployedSchedule
from ..lambda_service.stack_gaps import apply_ttl
from ..lambda_service.stack_runners import DeployedStack, load_stack
from .cdk_cli import bootstrap_and_deploy
from .steps import step

EXAMPLE_STACK = "SendOnceExample"
SENDER_IDENTITY = "example.com"
# The output the example app declares for the queue its on_outcome rule feeds.
APP_QUEUE_OUTPUT = "UndeliverableReceiptsUrl"


@dataclass
class Deployed:
    """The example app's parts, as deployed."""

    consumer: DeployedConsumer
    recorder: DeployedConsumer
    relays: list[DeployedStreamFunction]  # the outbox relay
    table: str
    configuration_set: str
    outcome_publishers: list[DeployedStreamFunction]
    outbox_table: str | None
    app_queue_url: str | None  # where the app hears of bounces and complaints
    attachments_bucket: str | None  # the pipeline's claim-check bucket, from its stack output
    urgent_consumer: DeployedConsumer | None = None  # the urgent lane's, with urgent_lane
    ses_tenants: tuple[str, ...] = ()  # the SES tenants the stack declares (AWS::SES::Tenant)
    schedules: tuple[DeployedSchedule, ...] = ()  # its rate(...) rules' targets: the schedule and quota watches


def cdk_context(function_timeout_s: int, evidence_grace_s: int, send_rate: float) -> dict[str, str]:
    """The context values examples/app.py reads (`cdk deploy --context`)."""
    return {"functionTimeoutSeconds": str(function_timeout_s), "evidenceGraceSeconds": str(evidence_grace_s),
            "sendRate": f"{send_rate:g}"}


def deploy(aws: LocalAws, stack_name: str, project_dir: Path, context: dict[str, str], cdk_out: Path, cdk_log: Path,
           say: Callable[[str], None]) -> tuple[Deployed, list[str]]:
    """Bootstrap and deploy the example app with the real CDK CLI, then find its parts; the emulator's gaps said."""
    say(f"{step(2)} cdk bootstrap + cdk deploy {stack_name} (examples/app.py) to it; log in {cdk_log}")
    bootstrap_and_deploy(stack_name, project_dir.resolve(), cdk_out, {**os.environ}, aws.account_id, aws.region,
                         context, cdk_log)
    stack = load_stack(stack_name, cdk_out)
    deployed = _parts(stack)
    notes = emulator_gaps(deployed.table, stack.configuration_sets, deployed.ses_tenants)
    for note in notes:
        say(f"      emulator gap: {note}")
    boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER_IDENTITY)
    consumer, config = deployed.consumer, ConsumerConfig.from_env(deployed.consumer.function.environment)
    say(f"{step(3)} deployed {consumer.function.name}: timeout {consumer.function.timeout_s:g} s, batch "
        f"{consumer.source.batch_size}, {consumer.source.max_concurrency} concurrent, policy "
        f"{config.delivery.value}, SES evidence grace {(config.evidence_grace_ms or 0) // 1000} s; "
        f"recorder {deployed.recorder.function.name}; SES identity {SENDER_IDENTITY} verified")
    return deployed, notes


def _parts(stack: DeployedStack) -> Deployed:
    cloudformation = boto3.client("cloudformation")
    pipeline = locate(cloudformation, stack.name, None, None, None, None)
    consumer = stack.consumer(HANDLER)
    streams = stack.stream_functions
    return Deployed(
        consumer, stack.consumer(RECORDER_HANDLER), [s for s in streams if s.function.handler != OUTCOME_HANDLER],
        pipeline.need("table"), ConsumerConfig.from_env(consumer.function.environment).configuration_set or "",
        [s for s in streams if s.function.handler == OUTCOME_HANDLER], pipeline.outbox_table,
        _output(cloudformation, stack.name, APP_QUEUE_OUTPUT), pipeline.attachments_bucket,
        _urgent_consumer(stack), tuple(declared_tenants(stack.template)), tuple(stack.schedules))


def _urgent_consumer(stack: DeployedStack) -> DeployedConsumer | None:
    try:
        return stack.consumer(HANDLER, lane=Priority.URGENT.value)
    except LookupError:
        return None


def declared_tenants(template: dict[str, Any]) -> list[str]:
    """The names of the SES tenants a stack's template declares (``AWS::SES::Tenant``), in template order."""
    return [str(resource["Properties"]["TenantName"]) for resource in template.get("Resources", {}).values()
            if resource.get("Type") == "AWS::SES::Tenant"]


def _output(cloudformation: Any, stack: str, output_id: str) -> str | None:
    """The value of the stack's output ``output_id`` (CDK keeps a top-level output's id as its key)."""
    described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    return next((o["OutputValue"] for o in described.get("Outputs") or [] if o["OutputKey"].startswith(output_id)),
                None)


def emulator_gaps(table_name: str, configuration_sets: list[str], ses_tenants: tuple[str, ...] = ()) -> list[str]:
    """Do by API what the emulator's CloudFormation skips and loading the stack did not, and say what both did."""
    ses = boto3.client("sesv2")
    known = {tenant["TenantName"] for tenant in ses.list_tenants().get("Tenants", [])} if ses_tenants else set()
    for tenant in ses_tenants:
        if tenant not in known:
            ses.create_tenant(TenantName=tenant)
    tenants = [f"moto's CloudFormation skips the stack's SES tenants: they were made by API ({', '.join(ses_tenants)}) "
               "in the emulator's SES, which plays tenants and their sending status; the emulator's log of sends "
               "keeps each send's TenantName"] if ses_tenants else []
    return [*tenants,
        apply_ttl(table_name),
        "point-in-time recovery and the queues' TLS-only policies are in the template but not modelled by moto",
        "moto runs no Lambda code without Docker: the local runners invoke the deployed functions for their SQS "
        "and DynamoDB-stream event sources, and moto's own Docker-bound delivery is switched off",
        f"moto's CloudFormation skips the SES configuration set and its event destination: the set was made by API "
        f"({', '.join(configuration_sets)}) and named in the consumer's environment; moto's SES publishes no "
        "events, so the local publisher plays SES's part, putting the events SES documents for each email sent "
        "through the set on the emulator's default event bus, where the deployed rule routes them to the recorder",
    ]
