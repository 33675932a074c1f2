"""`sendonce-local run`: Lambda's event sources for a stack deployed to the emulator, for as long as you like.

Every SQS-triggered function of the stack (each pipeline's consumer and SES-event recorder) and every
DynamoDB-stream-triggered one (an outbox relay) is polled at once, as Lambda's event source mappings do, with the
code from cdk.out (the stack loaded and its runners started by :mod:`sendonce_local.lambda_service.stack_runners`).
Any number of runs may follow one another against one emulator (stream positions outlive a run:
:mod:`sendonce_local.lambda_service.checkpoints`), and a running one follows redeploys. Each record the functions
handle is one line (the function's own JSON line with ``--json``, :mod:`.run_output`); Ctrl-C (or
``--until-drained``) ends the run with a summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.deploy_config import ConsumerConfig

from ..lambda_service.checkpoints import StreamCheckpoints
from ..lambda_service.deployed_stack import StackNotFound, read_template
from ..lambda_service.sqs_source import FaultPlan
from ..lambda_service.stack_runners import StackRunners, load_stack
from ..lambda_service.stack_watch import APPLIED, POLL_EVERY_S, StackWatch
from .run_output import FunctionOutput, Summary, say_to

QUIET_S = 2.0  # how long every queue must stay empty for --until-drained (SES's events come a second later)
IDENTITY_ARN = re.compile(r":ses:[^:]*:[^:]*:identity/(?P<identity>[^\s\"]+)$")


class RunRefused(RuntimeError):
    """Why run cannot start, in one line with the fix."""


def sender_identities(template: dict[str, Any]) -> list[str]:
    """The SES identities the stack's functions may send from: the identity ARNs its policies grant
    ``ses:SendEmail``/``ses:SendRawEmail`` on."""
    found: set[str] = set()
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::IAM::Policy":
            continue
        for statement in resource["Properties"].get("PolicyDocument", {}).get("Statement", []):
            actions = statement.get("Action", [])
            actions = [actions] if isinstance(actions, str) else actions
            if not any(str(a).startswith("ses:Send") for a in actions):
                continue
            resources = statement.get("Resource", [])
            for item in [resources] if not isinstance(resources, list) else resources:
                match = IDENTITY_ARN.search(_flatten(item))
                if match and "*" not in match["identity"]:
                    found.add(match["identity"])
    return sorted(found)


def _flatten(value: Any) -> str:
    """A template string value with its Fn::Join parts joined and references dropped."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flatten(p) for p in parts)
    return ""


def verify_identities(stack: str, template: dict[str, Any], say: Callable[[str], None]) -> list[str]:
    """Verify the stack's sender identities in the emulator's SES (it refuses every send from one it does not
    know, as SES does); refuse when the stack names none."""
    identities = sender_identities(template)
    if not identities:
        raise RunRefused(f"cannot tell which SES identity stack {stack} sends from (none is named in its "
                         "policies): verify it yourself with `aws sesv2 create-email-identity --email-identity "
                         "example.com`, then run again with --skip-identities")
    ses = boto3.client("sesv2")
    made = []
    for identity in identities:
        try:
            ses.get_email_identity(EmailIdentity=identity)
        except ses.exceptions.NotFoundException:
            ses.create_email_identity(EmailIdentity=identity)
            made.append(identity)
    say(f"SES sender identities of {stack}: {', '.join(identities)} verified in the emulator"
        + (f" (verified now: {', '.join(made)}; on AWS you verify them yourself)" if made else ""))
    return identities


@dataclass(frozen=True)
class RunOptions:
    stack: str
    cdk_out: Path
    until_drained: bool = False
    faults: float = 0.0
    as_json: bool = False
    skip_identities: bool = False
    bound_s: float = 3600


def run(options: RunOptions, out: IO[str] | None = None, stop: threading.Event | None = None) -> Summary:
    """Poll the stack's queues and streams until ``stop`` is set (SIGINT/SIGTERM), or, with ``until_drained``,
    until every queue stayed empty for a moment; then print the summary."""
    out = out or sys.stdout
    if not os.environ.get("AWS_ENDPOINT_URL"):
        raise RunRefused("run talks only to an emulator: set AWS_ENDPOINT_URL (see `sendonce-local serve`)")
    read_template(options.stack, options.cdk_out)  # before the emulator is asked: the stacks cdk.out holds

    def say(text: str) -> None:
        assert out is not None
        say_to(out, text if not options.as_json else json.dumps({"logger": "sendonce-local", "message": text}))

    watch = StackWatch(options.stack)  # before reading the stack: a deploy that completes meanwhile is seen
    deployed = load_stack(options.stack, options.cdk_out)
    if not deployed.consumers:
        raise RunRefused(f"stack {options.stack} has no SQS-triggered function")
    sends_email = any(ConsumerConfig.is_consumer_env(c.function.environment) for c in deployed.consumers)
    if sends_email and not options.skip_identities:
        verify_identities(options.stack, deployed.template, say)
    if deployed.configuration_sets:
        say(f"configuration sets {', '.join(deployed.configuration_sets)} made by API (the emulator's CloudFormation "
            "skips them); SES's events for sends through them are played by `sendonce-local serve`")
    stop = stop or threading.Event()
    output = FunctionOutput(out, options.as_json)
    started = time.monotonic()
    checkpoints = StreamCheckpoints(os.environ["AWS_ENDPOINT_URL"])
    runners = StackRunners(dict(os.environ), output.writer, checkpoints,
                           lambda: FaultPlan(options.faults, seed=1) if options.faults else None)
    with _stopped_by_signals(stop):
        try:
            for relay in deployed.stream_functions:
                say(f"relaying {relay.source.stream_arn} to {relay.function.name}")
            if deployed.stream_functions:
                say(f"stream positions kept in {checkpoints.path}")
            for consumer in deployed.consumers:
                say(f"polling {consumer.source.queue_url} for {consumer.function.name}")
            for schedule in deployed.schedules:
                say(f"playing EventBridge's schedule {schedule.rule}: {schedule.function.name} every "
                    f"{schedule.every_s:g} s (moto never fires a scheduled rule)")
            for line in deployed.unplayed_schedules:
                say(line)
            runners.start(deployed.consumers, deployed.stream_functions).play_schedules(deployed.schedules)
            say("until every queue is drained" if options.until_drained else "until Ctrl-C")
            _wait(runners, watch, options, stop, say)
        finally:
            runners.stop()
            output.close()
    say(output.summary.text(time.monotonic() - started))
    return output.summary


def _wait(runners: StackRunners, watch: StackWatch, options: RunOptions, stop: threading.Event,
          say: Callable[[str], None]) -> None:
    deadline = time.monotonic() + options.bound_s
    quiet_since: float | None = None
    next_look = time.monotonic() + POLL_EVERY_S
    while not stop.wait(0.5):
        if time.monotonic() >= next_look:
            _follow_deploys(runners, watch, options, say)
            next_look = time.monotonic() + POLL_EVERY_S
        if not options.until_drained:
            continue
        if time.monotonic() > deadline:
            return
        busy = any(sum(r.queue_depth().values()) or r.stats.in_flight for r in runners.runners) or not all(
            relay.idle() for relay in runners.relays)
        now = time.monotonic()
        quiet_since = None if busy else (quiet_since or now)
        if quiet_since is not None and now - quiet_since >= QUIET_S:
            return


def _follow_deploys(runners: StackRunners, watch: StackWatch, options: RunOptions, say: Callable[[str], None]
                    ) -> None:
    status = watch.completed()
    if status is None:
        return
    if status not in APPLIED:
        say(f"a deploy of {options.stack} ended in {status}: the functions as deployed before keep running")
        return
    try:
        deployed = load_stack(options.stack, options.cdk_out)  # a redeploy resets what was made by API
        if not options.skip_identities and sender_identities(deployed.template):
            verify_identities(options.stack, deployed.template, lambda _: None)  # a new pipeline's sender, quietly
        line = runners.reload(deployed)
        runners.play_schedules(deployed.schedules)
    except (StackNotFound, BotoCoreError, ClientError, OSError, ValueError, RuntimeError) as error:
        # The run goes on with what it has: a later deploy is read again.
        say(f"a deploy of {options.stack} completed but could not be read ({' '.join(str(error).split())[:200]}): "
            "the functions as read before keep running")
        return
    say(line or f"a deploy of {options.stack} completed; nothing run uses changed")


class _stopped_by_signals:
    """SIGINT and SIGTERM set ``stop`` (the run ends with its summary) while the run lasts, in the main thread."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._saved: list[tuple[int, Any]] = []

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._saved.append((sig, signal.signal(sig, lambda *_: self._stop.set())))

    def __exit__(self, *_: object) -> None:
        for sig, handler in self._saved:
            signal.signal(sig, handler)
