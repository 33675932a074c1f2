"""9d. An urgent job's and a quiet tenant's time to SES during one tenant's bulk flood at 40 x SES's rate, against
the same alone: a pipeline with ``urgent_lane`` and ``ses_tenants`` synthesized once, deployed to a fresh in-process
emulator for each run, both lanes' consumers run from the cloud assembly as `sendonce-local run` runs them."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import boto3

FLOOD_RATE = 5.0  # what the emulator's SES accepts a second, and the pipeline's send_rate
FLOOD_INSTANCES = 5  # max_concurrency
FLOOD_TENANTS = ("northwind", "contoso")  # the flooding tenant, then the quiet one
STACK = "FloodBench"


def _synth(out: Path, timeout_s: int) -> None:
    """The pipeline as a user deploys it for this: default props but the rate, the instances, the function timeout,
    the urgent lane and SES tenants (SES's events, outcome events, the quota watch and alarms off: the emulator runs
    none of them)."""
    import aws_cdk as cdk

    from sendonce_constructs import SendOnceEmailQueue

    app = cdk.App(outdir=str(out))
    mail = SendOnceEmailQueue(cdk.Stack(app, STACK), "Mail", sender="example.com", send_rate=FLOOD_RATE,
                              function_timeout=cdk.Duration.seconds(timeout_s),
                              max_concurrency=FLOOD_INSTANCES, urgent_lane=True, ses_tenants=True, ses_events=False,
                              outcome_events=False, quota_watch=False, alarms=False)
    for tenant in FLOOD_TENANTS:
        mail.add_ses_tenant(tenant)
    app.synth()


def _deploy(out: Path) -> Any:
    """The synthesized template deployed to the emulator this process points at; the code is read from ``out``."""
    from sendonce_local.lambda_service.stack_runners import load_stack

    template = json.loads((out / f"{STACK}.template.json").read_text())
    for resource in template["Resources"].values():  # no asset bucket in a bare emulator: the runners read out
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"]["Code"] = {"ZipFile": "def handler(event, context): pass"}
    template.pop("Rules", None)
    template.pop("Parameters", None)
    boto3.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(template),
                                                Capabilities=["CAPABILITY_IAM"])
    boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
    return load_stack(STACK, out)


def deadline_hand_backs(log: str) -> int:
    """The records the consumers handed back for want of time (``deadline``), read from their JSON lines: a figure
    of how the consumer works, not a count of emails (those come from SES)."""
    from sendonce_runtime.outcome import Outcome

    count = 0
    for line in log.splitlines():
        try:
            count += json.loads(line[line.index("{"):]).get("outcome") == Outcome.DEADLINE.value
        except ValueError:
            continue
    return count


def flood_scenario(timeouts_s: tuple[int, ...], flood_s: float, arrivals: int, gap_s: float,
                   repeats: int) -> dict[int, list[tuple[Any, int]]]:
    """For each function timeout, ``repeats`` runs, each in an emulator of its own: the flood scenario's report of
    each, and the records its consumers handed back at their deadline."""
    reports: dict[int, list[tuple[Any, int]]] = {}
    for timeout_s in timeouts_s:
        reports[timeout_s] = _runs(timeout_s, flood_s, arrivals, gap_s, repeats)
    return reports


def _runs(timeout_s: int, flood_s: float, arrivals: int, gap_s: float, repeats: int) -> list[tuple[Any, int]]:
    from sendonce_local.demo.example_app import declared_tenants
    from sendonce_local.demo.scenarios.flood import FloodPlan, Lanes, run_flood
    from sendonce_local.emulator.server import local_aws
    from sendonce_runtime.entry_points import HANDLER

    reports = []
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        _synth(out, timeout_s)
        for repeat in range(repeats):
            with local_aws(pointed=True) as aws, tempfile.TemporaryFile("w+") as log:
                stack = _deploy(out)
                lanes = Lanes(stack.consumer(HANDLER), stack.consumer(HANDLER, lane="urgent"),
                              *declared_tenants(stack.template)[:2])
                report = run_flood(lanes, aws.environment, aws.ses_sends, FLOOD_RATE,
                                   FloodPlan(flood_s, arrivals, gap_s), seed=31 + repeat, log=log)
                log.seek(0)
                reports.append((report, deadline_hand_backs(log.read())))
    return reports
