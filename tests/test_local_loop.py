"""The README's local loop on one's own stack, as a user lives it, through the installed console commands only:
`sendonce-local serve` in its own process, an app outside the checkout with two pipelines (one with every prop
on: fifo, outbox, dashboard, a VPC, an existing table, its own DLQ, a KMS key, an attachments bucket, a larger
message size), `cdk deploy`, a failed deploy and
its fix, the producer, `sendonce-local run` twice (once until drained, once long-lived picking up late jobs),
SES's events seen by `sendonce status`, and the CLI's errors in one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from serve_process import served

from sendonce_contract.deploy_config import Env

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
APP = '''
import os
import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb, aws_ec2 as ec2, aws_events_targets as targets, aws_kms as kms
from aws_cdk import aws_sqs as sqs
from sendonce_constructs import SendOnceEmailQueue

VARIANT = os.environ.get("LOOP_VARIANT", "first")


class Shop(cdk.Stack):
    def __init__(self, scope, id, **kwargs):
        super().__init__(scope, id, **kwargs)
        staging = {"allowed_recipients": ["ada@example.org"]} if VARIANT == "allowed" else {}
        receipts = SendOnceEmailQueue(self, "Receipts", sender="example.com", max_concurrency=2,
                                      function_timeout=cdk.Duration.seconds(10 if VARIANT == "first" else 12),
                                      waiting_room=True, **staging)
        receipts.on_outcome("Heard", targets.SqsQueue(sqs.Queue(self, "Heard")))  # the app's outcome queue
        table = dynamodb.Table(self, "Ledger", partition_key=dynamodb.Attribute(
            name="dedupeKey", type=dynamodb.AttributeType.STRING))
        SendOnceEmailQueue(
            self, "Alerts", sender="alerts@example.com", fifo=True, outbox=True, dashboard=True, max_concurrency=2,
            function_timeout=cdk.Duration.seconds(10), attachments_bucket=True, max_message_size_bytes=524_288,
            encryption_key=kms.Key(self, "Key"), existing_table=table,
            dead_letter_queue=sqs.Queue(self, "AlertsDlq", fifo=True, retention_period=cdk.Duration.days(14),
                                        max_message_size_bytes=1_048_576),
            vpc=ec2.Vpc(self, "Vpc", max_azs=1, nat_gateways=0))
        if VARIANT == "broken":  # a resource the emulator refuses, as AWS would
            sqs.CfnQueue(self, "Broken", queue_name="not a valid queue name!")


app = cdk.App()
Shop(app, "Shop", env=cdk.Environment(account=os.environ["CDK_DEFAULT_ACCOUNT"],
                                      region=os.environ["CDK_DEFAULT_REGION"]))
app.synth()
'''


@dataclass
class Emulator:
    process: subprocess.Popen[str]
    environment: dict[str, str]
    stderr: Path


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    stderr = tmp_path_factory.mktemp("serve") / "stderr.txt"
    # run's stream positions, kept apart from the user's own (see sendonce_local.lambda_service.checkpoints)
    with served(stderr, {"XDG_STATE_HOME": str(stderr.with_name("state"))}) as (process, environment):
        yield Emulator(process, environment, stderr)


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("my-app")  # outside the checkout, as a user's own project
    (folder / "app.py").write_text(APP)
    (folder / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} app.py"}))
    return folder


def _env(emulator: Emulator, **extra: str) -> dict[str, str]:
    return {**os.environ, **emulator.environment, **extra}


def _cdk(emulator: Emulator, app_dir: Path, *args: str, variant: str = "first") -> subprocess.CompletedProcess[str]:
    cdk = shutil.which("cdk")
    assert cdk, "the CDK CLI is not on PATH: run the tests with `make test`"
    approval = ["--require-approval", "never"] if args[0] == "deploy" else []
    return subprocess.run([cdk, *args, "--no-notices", *approval], cwd=app_dir, text=True,
                          capture_output=True, env=_env(emulator, LOOP_VARIANT=variant), timeout=600, check=False)


def _command(emulator: Emulator, app_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / args[0]), *args[1:]], cwd=app_dir, text=True, capture_output=True,
                          env=_env(emulator), timeout=600, check=False)


def _one_line_error(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


@pytest.fixture(scope="module")
def deployed(serve: Emulator, app_dir: Path) -> dict[str, str]:
    """Deploy, fail a deploy, fix it (a changed stack): the outputs of the fixed stack."""
    result = _cdk(serve, app_dir, "bootstrap", f"aws://{serve.environment['CDK_DEFAULT_ACCOUNT']}/"
                  f"{serve.environment['AWS_REGION']}")
    assert result.returncode == 0, result.stderr[-3000:]
    first = _cdk(serve, app_dir, "deploy", "Shop", "--outputs-file", "first.json")
    assert first.returncode == 0, first.stderr[-3000:]
    broken = _cdk(serve, app_dir, "deploy", "Shop", variant="broken")
    assert broken.returncode != 0 and "UPDATE_ROLLBACK_COMPLETE" in broken.stderr, broken.stderr[-3000:]
    # The reason, as CloudFormation gives it in the stack's events (the CLI prints it only if its poll saw it).
    env = serve.environment
    events = boto3.client("cloudformation", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"],
                          aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"]).describe_stack_events(StackName="Shop")
    assert any("Can only include alphanumeric characters" in e.get("ResourceStatusReason", "")
               for e in events["StackEvents"]), broken.stderr[-3000:]
    fixed = _cdk(serve, app_dir, "deploy", "Shop", "--outputs-file", "outputs.json", variant="changed")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    return dict(json.loads((app_dir / "outputs.json").read_text())["Shop"])


def _output(outputs: dict[str, str], prefix: str) -> str:
    return next(value for key, value in outputs.items() if key.startswith(prefix))


def _point_at(serve: Emulator, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read the emulator as a user's script would, for this test only (later tests use the session's emulator)."""
    for name, value in serve.environment.items():
        monkeypatch.setenv(name, value)


def test_deploy_update_after_a_failed_deploy_with_outputs_and_every_prop(serve: Emulator, deployed: dict[str, str],
                                                                           monkeypatch: pytest.MonkeyPatch):
    assert _output(deployed, "AlertsQueueUrl").endswith(".fifo")  # fifo
    assert _output(deployed, "AlertsOutboxTableName")  # outbox
    assert _output(deployed, "ReceiptsDedupeTableName") and _output(deployed, "AlertsDeadLetterQueueUrl")
    _point_at(serve, monkeypatch)
    stack = boto3.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_COMPLETE" and len(stack["Outputs"]) == len(deployed)
    functions = boto3.client("lambda").list_functions()["Functions"]
    assert {f["Timeout"] for f in functions if "ReceiptsConsumer" in f["FunctionName"]} == {12}  # the update
    # The attachments bucket: made with its expiry (FIFO with an outbox: 1 + 4 + 14 + 4 + 1 days), named to the
    # consumer and in the outputs; the job queue takes the larger messages.
    resources = boto3.client("cloudformation").describe_stack_resources(StackName="Shop")["StackResources"]
    [bucket] = [r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == "AWS::S3::Bucket"
                and r["LogicalResourceId"].startswith("AlertsAttachmentsBucket")]
    assert _output(deployed, "AlertsAttachmentsBucketName") == bucket
    [rule] = boto3.client("s3").get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert (rule["ID"], rule["Expiration"]["Days"]) == ("ExpireAttachments", 24)
    [consumer] = [f for f in functions if "AlertsConsumer" in f["FunctionName"]]
    assert consumer["Environment"]["Variables"][Env.ATTACHMENTS_BUCKET] == bucket
    queue = _output(deployed, "AlertsQueueUrl")
    assert boto3.client("sqs").get_queue_attributes(QueueUrl=queue, AttributeNames=["MaximumMessageSize"])[
        "Attributes"]["MaximumMessageSize"] == "524288"
    said = serve.stderr.read_text()
    assert "Traceback" not in said and "UserWarning" not in said, said  # the failed deploy's rollback is quiet


def test_the_loop_run_twice_with_late_jobs_and_ses_evidence(serve: Emulator, app_dir: Path,
                                                            deployed: dict[str, str],
                                                            monkeypatch: pytest.MonkeyPatch):
    from sendonce_producer import EmailJob, enqueue, outbox_put

    _point_at(serve, monkeypatch)
    receipts = _output(deployed, "ReceiptsQueueUrl")
    for key in ("receipt:1", "receipt:2"):
        enqueue(receipts, EmailJob(dedupe_key=key, sender="shop@example.com", to=["ada@example.org"],
                                   subject="Your receipt", text="Thanks."))
    enqueue(receipts, EmailJob(dedupe_key="receipt:stranger", sender="someone@elsewhere.org", to=["ada@example.org"],
                               subject="Not ours", text="SES refuses a sender it has not verified."))
    boto3.client("sqs").send_message(QueueUrl=receipts, MessageBody="not a job")

    first = _command(serve, app_dir, "sendonce-local", "run", "--stack", "Shop", "--until-drained")
    assert first.returncode == 0, first.stderr
    assert "example.com verified in the emulator" in first.stdout
    # EventBridge's part, played: the waiting room's watch each minute, the quota watch every five.
    assert re.search(r"playing EventBridge's schedule \S*WaitingRoomSchedule\S*: \S+ every 60 s", first.stdout)
    assert re.search(r"playing EventBridge's schedule \S*QuotaWatchSchedule\S*: \S+ every 300 s", first.stdout)
    assert "sent" in first.stdout and "-> DLQ (invalid-message)" in first.stdout, first.stdout
    summary = first.stdout.strip().splitlines()[-1]
    # A SENT record whose write a loaded host timed out travels with a copy, which then counts as a duplicate.
    assert summary.startswith("summary") and re.search(r"sent 2, duplicates \d+,", summary), first.stdout
    assert "dead-lettered 2 (invalid-message 1, ses-refused 1)" in summary and "SES events recorded" in summary
    held = _command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Receipts", "status",
                    "receipt:stranger")
    # Twice when a loaded host lost a dead letter's answer: it is sent again, never taken as done (a harmless entry).
    assert re.search(r"no record; in the dead-letter queue \((1 message|2 messages)\): ses-refused", held.stdout), held
    _one_line_error(_command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Receipts", "dlq",
                             "redrive", "--reason", "nope"), "reasons in the DLQ:", "ses-refused")

    status = _command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Receipts", "status", "receipt:1")
    assert status.returncode == 0 and "SENT" in status.stdout, status
    after = _command(serve, app_dir, "sendonce", "status", "receipt:1", "--stack", "Shop", "--pipeline", "Receipts",
                     "--json")  # the options after the command read as before it
    assert after.returncode == 0 and json.loads(after.stdout)["status"] == "SENT", after
    # SES's events reach the recorder within seconds of the send, through serve's publisher and the stack's rule.
    _until(lambda: "no event from SES yet" not in _command(
        serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Shop/Receipts", "status", "receipt:2").stdout)

    # The outcome events the first run published, read off the stack's listener queue before the second starts.
    heard_queue = next(url for url in boto3.client("sqs").list_queues(QueueNamePrefix="Shop-Heard")["QueueUrls"])
    heard_first = _drain(heard_queue)

    # The second run stays up; jobs that arrive later (through the FIFO pipeline's outbox) are picked up.
    runner = subprocess.Popen([str(BIN / "sendonce-local"), "run", "--stack", "Shop"], cwd=app_dir, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(serve), start_new_session=True)
    try:
        enqueue(receipts, EmailJob(dedupe_key="receipt:1", sender="shop@example.com", to=["ada@example.org"],
                                   subject="Your receipt", text="Thanks."))  # a duplicate, across runs
        job = EmailJob(dedupe_key="alert:late", sender="alerts@example.com", to=["ops@example.org"],
                       subject="Late", text="Picked up by a running run.")
        boto3.client("dynamodb").transact_write_items(TransactItems=[
            outbox_put(_output(deployed, "AlertsOutboxTableName"), job)])
        _until(lambda: "SES confirmed" in (s := _command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline",
                                                          "Alerts", "status", "alert:late").stdout)
               and "no event from SES yet" not in s)
    finally:
        os.killpg(runner.pid, signal.SIGINT)  # Ctrl-C in a terminal: run and its execution environments get it
        out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, err
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err, out + err
    assert "until Ctrl-C" in out and "alert:late" in out
    assert out.strip().splitlines()[-1].startswith("summary") and re.search(r"sent 1, duplicates [1-9]", out), out
    # The second run continued the outcome publisher's stream where the first left it: it published none of the
    # first run's events again. (Within a run an event may come twice with its eventId, as documented: a PutEvents
    # whose answer came too late on a loaded host is tried again.)
    heard_second = _drain(heard_queue)
    first_ids = {event["detail"]["eventId"] for event in heard_first}
    again = [(e["detail"]["dedupeKey"], e["detail"]["transition"]) for e in heard_second
             if e["detail"]["eventId"] in first_ids]
    assert first_ids and not again, again
    sent = {e["detail"]["eventId"] for e in heard_first + heard_second if e["detail"]["transition"] == "sent"}
    assert len(sent) == 2, heard_first + heard_second  # receipt:1 and receipt:2


def test_a_running_run_follows_a_redeploy_that_adds_allowed_recipients(serve: Emulator, app_dir: Path,
                                                                        deployed: dict[str, str],
                                                                        monkeypatch: pytest.MonkeyPatch):
    from sendonce_producer import EmailJob, enqueue

    _point_at(serve, monkeypatch)
    receipts, ses = _output(deployed, "ReceiptsQueueUrl"), boto3.client("ses")

    def sent() -> int:
        return int(sum(p["DeliveryAttempts"] for p in ses.get_send_statistics()["SendDataPoints"]))

    def job(key: str) -> EmailJob:
        return EmailJob(dedupe_key=key, sender="shop@example.com", to=["bob@example.org"], subject="Receipt", text="-")

    runner = subprocess.Popen([str(BIN / "sendonce-local"), "run", "--stack", "Shop"], cwd=app_dir, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(serve))
    lines = _lines_of(runner)
    try:
        _until(lambda: any("until Ctrl-C" in line for line in lines))
        before = sent()
        enqueue(receipts, job("receipt:bob-before"))  # anyone may be emailed yet
        _until(lambda: sent() == before + 1)
        redeploy = _cdk(serve, app_dir, "deploy", "Shop", variant="allowed")
        assert redeploy.returncode == 0, redeploy.stderr[-3000:]
        _until(lambda: any("redeploy of Shop picked up" in line for line in lines), bound_s=30)
        enqueue(receipts, job("receipt:bob-after"))
        _until(lambda: "recipient-not-allowed" in _command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline",
                                                           "Receipts", "status", "receipt:bob-after").stdout)
        assert sent() == before + 1  # nothing went to bob after the redeploy
    finally:
        runner.send_signal(signal.SIGINT)
        runner.wait(timeout=120)
    out = "".join(lines)
    assert runner.returncode == 0, out
    reloaded = next(line for line in lines if "redeploy of Shop picked up" in line)
    assert "ReceiptsConsumer" in reloaded and "environment" in reloaded, reloaded
    assert any("receipt:bob-after" in line and "-> DLQ (recipient-not-allowed)" in line for line in lines), out
    summary = lines[-1]
    assert summary.startswith("summary") and "dead-lettered 1 (recipient-not-allowed 1)" in summary, summary
    assert "handed back to the queue 0" in summary, summary


def _lines_of(process: subprocess.Popen[str]) -> list[str]:
    """The process's output lines as they come (a thread reads them), to wait on without blocking."""
    lines: list[str] = []
    assert process.stdout is not None
    stdout = process.stdout
    threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True).start()
    return lines


def _drain(queue_url: str) -> list[dict[str, Any]]:
    """Every message of the queue, each once (read until two long polls come back empty)."""
    sqs, found, empty = boto3.client("sqs"), [], 0
    while empty < 2:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                       VisibilityTimeout=600).get("Messages", [])
        empty = 0 if messages else empty + 1
        found += [json.loads(m["Body"]) for m in messages]
        assert len(found) < 1000, "the queue does not end"
    return found


def test_the_operator_command_finds_pipelines_and_says_errors_in_one_line(serve: Emulator, app_dir: Path,
                                                                           deployed: dict[str, str]):
    _one_line_error(_command(serve, app_dir, "sendonce", "--stack", "Shop", "status", "k"),
                    "several sendonce pipelines (Shop/Alerts, Shop/Receipts)")
    _one_line_error(_command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Nope", "status", "k"),
                    "no sendonce pipeline 'Nope'; it has: Shop/Alerts, Shop/Receipts")
    info = _command(serve, app_dir, "sendonce", "--stack", "Shop", "--pipeline", "Alerts", "info")
    assert info.returncode == 0 and _output(deployed, "AlertsQueueUrl") in info.stdout, info
    assert re.search(r"evidence grace period\s+300 s", info.stdout), info  # its default, from the stack
    _one_line_error(_command(serve, app_dir, "sendonce-local", "run", "--stack", "Nope"), "Nope")


def _until(condition, bound_s: float = 120) -> None:
    deadline = time.monotonic() + bound_s
    while not condition():
        assert time.monotonic() < deadline, "not within the bound"
        time.sleep(0.5)
