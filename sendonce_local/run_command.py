"""`sendonce-local run`: Lambda's event sources for a stack deployed to the emulator, for as long as you like.

Every SQS-triggered function of the stack (each pipeline's consumer and SES-event recorder) and every
DynamoDB-stream-triggered one (an outbox relay) is polled at once, as Lambda's event source mappings do, with the
code from cdk.out. Any number of runs may follow one another against one emulator (stream positions outlive a
run: :mod:`.stream_checkpoints`), and a running one follows redeploys (:mod:`.stack_reload`). Each record the functions
handle is one line (the function's own JSON line with ``--json``); Ctrl-C (or ``--until-drained``) ends the run
with a summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.schema import Ledger
from sendonce_runtime.outcome import DEAD_LETTER_REASONS, Outcome, Tally

from .emulator_gaps import make_skipped_configuration_sets
from .event_source_runner import FaultPlan
from .stack_reader import StackNotFound, read_consumers, read_stream_functions
from .stack_reload import APPLIED, POLL_EVERY_S, Pollers, StackWatch
from .stream_checkpoints import StreamCheckpoints

# The consumer's outcomes (as its log lines name them) that put the job in the DLQ, with the reason code it carries.
DEAD_LETTERED = {outcome.value: code.value for outcome, code in DEAD_LETTER_REASONS.items()}
# What the summary counts each outcome as (the outcome table says); a line it does not know is handed back.
TALLIES = {outcome.value: outcome.meaning.summary for outcome in Outcome}
QUIET_S = 2.0  # how long every queue must stay empty for --until-drained (SES's events come a second later)
IDENTITY_ARN = re.compile(r":ses:[^:]*:[^:]*:identity/(?P<identity>[^\s\"]+)$")


class RunRefused(RuntimeError):
    """Why run cannot start, in one line with the fix."""


@dataclass
class Summary:
    """What the functions said they did, counted from their log lines."""

    outcomes: Counter[str] = field(default_factory=Counter)
    dead_lettered: Counter[str] = field(default_factory=Counter)
    evidence: Counter[str] = field(default_factory=Counter)
    relayed: int = 0

    def add(self, line: dict[str, Any]) -> None:
        outcome = str(line.get("outcome", ""))
        if line.get("logger") == "sendonce.evidence":
            if outcome in ("recorded", "double_send"):
                self.evidence[str(line.get("eventType"))] += 1
            return
        if line.get("logger") == "sendonce":
            self.outcomes[outcome] += 1
            if outcome in DEAD_LETTERED:
                self.dead_lettered[DEAD_LETTERED[outcome]] += 1

    def text(self, elapsed_s: float) -> str:
        tallies: Counter[str] = Counter()
        for name, n in self.outcomes.items():
            tallies[TALLIES.get(name, Tally.HANDED_BACK)] += n
        tallies[Tally.DEAD_LETTERED] = sum(self.dead_lettered.values())  # every outcome with a reason code
        dead = ", ".join(f"{code} {n}" for code, n in sorted(self.dead_lettered.items()))
        by_code = {Tally.DEAD_LETTERED: f" ({dead})"} if dead else {}
        counts = ", ".join(f"{tally} {tallies[tally]}{by_code.get(tally, '')}" for tally in Tally.ORDER)
        events = ", ".join(f"{kind} {n}" for kind, n in sorted(self.evidence.items()))
        return (f"summary after {elapsed_s:.0f} s: {counts}; SES events recorded "
                f"{sum(self.evidence.values())}{f' ({events})' if events else ''}")


def _worth_a_line(line: dict[str, Any]) -> bool:
    """Not the EMF and info lines a person does not need, nor an outcome publisher's batch that had no transition."""
    if "outcome" not in line:
        return False
    return line.get("logger") != "sendonce.outcomes" or bool(line.get("published") or line.get("failed"))


def readable(line: dict[str, Any]) -> str:
    """One record's outcome for a person: when, what, which key, and the detail that matters."""
    when = time.strftime("%H:%M:%S")
    if line.get("logger") == "sendonce.evidence":
        what = f"SES {line.get('eventType', 'event')} {line.get('outcome')}"
    elif line.get("logger") == "sendonce.outcomes":  # the outcome publisher: a batch of transitions, no one key
        what = f"outcome events {line.get('outcome')}"
        return "  ".join([when, f"{what:<22}", f"{line.get('published', 0)} published, {line.get('failed', 0)} "
                          f"failed: {', '.join(map(str, line.get('transitions', []))) or 'none'}"])
    else:
        what = str(line.get("outcome", "?"))
    parts = [when, f"{what:<22}", str(line.get(Ledger.KEY) or line.get("messageId") or "-")]
    if line.get(Ledger.SES_MESSAGE_ID):
        parts.append(f"ses {line[Ledger.SES_MESSAGE_ID]}")
    if line.get("outcome") in DEAD_LETTERED:
        parts.append(f"-> DLQ ({DEAD_LETTERED[str(line['outcome'])]})")
    if line.get("reason"):
        parts.append(f"({' '.join(str(line['reason']).split())[:120]})")
    return "  ".join(parts)


class FunctionOutput:
    """A pipe the functions write their lines into; a thread prints each (readable, or as is with ``as_json``)
    and counts it for the summary. Lines that are not JSON (a traceback) pass through."""

    def __init__(self, out: IO[str], as_json: bool) -> None:
        self.summary = Summary()
        self._out, self._json = out, as_json
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8")
        self._thread = threading.Thread(target=self._pump, name="function-output", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for raw in self._reader:
            text = raw.rstrip("\n")
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if isinstance(line, dict):
                self.summary.add(line)
                if not self._json and not _worth_a_line(line):
                    continue
                text = text if self._json else readable(line)
            _say(self._out, text)

    def close(self) -> None:
        self.writer.close()
        self._thread.join(timeout=5)
        self._reader.close()


def _say(out: IO[str], text: str) -> None:
    with contextlib.suppress(BrokenPipeError):  # the reader went away (`| head`): keep running quietly
        print(text, file=out, flush=True)


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
    template_path = options.cdk_out / f"{options.stack}.template.json"
    if not template_path.is_file():
        raise RunRefused(f"{template_path} is missing: synthesize or deploy the stack first")
    template = json.loads(template_path.read_text())

    def say(text: str) -> None:
        assert out is not None
        _say(out, text if not options.as_json else json.dumps({"logger": "sendonce-local", "message": text}))

    watch = StackWatch(options.stack)  # before reading the stack: a deploy that completes meanwhile is seen
    consumers = read_consumers(options.stack, options.cdk_out)
    if not consumers:
        raise RunRefused(f"stack {options.stack} has no SQS-triggered function")
    sends_email = any(ConsumerConfig.is_consumer_env(c.function.environment) for c in consumers)
    if sends_email and not options.skip_identities:
        verify_identities(options.stack, template, say)
    configuration_sets = make_skipped_configuration_sets(options.stack, options.cdk_out)
    if configuration_sets:
        say(f"configuration sets {', '.join(configuration_sets)} made by API (the emulator's CloudFormation skips "
            "them); SES's events for sends through them are played by `sendonce-local serve`")
        consumers = read_consumers(options.stack, options.cdk_out)  # with the sets in their environment
    stop = stop or threading.Event()
    output = FunctionOutput(out, options.as_json)
    started = time.monotonic()
    checkpoints = StreamCheckpoints(os.environ["AWS_ENDPOINT_URL"])
    pollers = Pollers(options.stack, options.cdk_out, output.writer, checkpoints,
                      lambda: FaultPlan(options.faults, seed=1) if options.faults else None)
    with _stopped_by_signals(stop):
        relays = read_stream_functions(options.stack, options.cdk_out)
        try:
            for relay in relays:
                say(f"relaying {relay.source.stream_arn} to {relay.function.name}")
            if relays:
                say(f"stream positions kept in {checkpoints.path}")
            for consumer in consumers:
                say(f"polling {consumer.source.queue_url} for {consumer.function.name}")
            pollers.start(consumers, relays)  # each starts its worker processes: together, not one by one
            say("until every queue is drained" if options.until_drained else "until Ctrl-C")
            _wait(pollers, watch, options, stop, say)
        finally:
            pollers.stop()
            output.close()
    say(output.summary.text(time.monotonic() - started))
    return output.summary


def _wait(pollers: Pollers, watch: StackWatch, options: RunOptions, stop: threading.Event,
          say: Callable[[str], None]) -> None:
    deadline = time.monotonic() + options.bound_s
    quiet_since: float | None = None
    next_look = time.monotonic() + POLL_EVERY_S
    while not stop.wait(0.5):
        if time.monotonic() >= next_look:
            _follow_deploys(pollers, watch, options, say)
            next_look = time.monotonic() + POLL_EVERY_S
        if not options.until_drained:
            continue
        if time.monotonic() > deadline:
            return
        busy = any(sum(r.queue_depth().values()) or r.stats.in_flight for r in pollers.runners) or not all(
            relay.idle() for relay in pollers.relays)
        now = time.monotonic()
        quiet_since = None if busy else (quiet_since or now)
        if quiet_since is not None and now - quiet_since >= QUIET_S:
            return


def _follow_deploys(pollers: Pollers, watch: StackWatch, options: RunOptions, say: Callable[[str], None]) -> None:
    status = watch.completed()
    if status is None:
        return
    if status not in APPLIED:
        say(f"a deploy of {options.stack} ended in {status}: the functions as deployed before keep running")
        return
    try:
        template = json.loads((options.cdk_out / f"{options.stack}.template.json").read_text())
        if not options.skip_identities and sender_identities(template):
            verify_identities(options.stack, template, lambda _: None)  # a new pipeline's sender, quietly
        line = pollers.reload()
    except (StackNotFound, BotoCoreError, ClientError, OSError, ValueError) as error:
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
