"""`sendonce-local run` follows redeploys: the stack's functions and event sources are read again once a deploy
completes, as Lambda applies UpdateFunctionConfiguration and event source mapping updates without a restart.

A function or mapping that changed (environment, code asset, timeout, memory, batch size, concurrency) gets a new
runner with new execution environments; the old one stops taking records and finishes what it holds on the old
version. For a queue the new runner starts first (SQS hides what either holds, so nothing is lost or handled
twice); for a stream the old one stops first and the new one continues from its checkpoint. A deploy that rolls
back leaves the stack as it was, so the runners stay as they are.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from .emulator_gaps import make_skipped_configuration_sets
from .event_source_runner import EventSourceRunner, FaultPlan
from .stack_reader import DeployedConsumer, DeployedStreamFunction, read_consumers, read_stream_functions
from .stream_checkpoints import StreamCheckpoints
from .stream_runner import StreamEventSourceRunner

POLL_EVERY_S = 2.0  # how often run asks CloudFormation whether the stack changed
# A DescribeStacks that hangs must not hold the run: a short bound, no retries (the next poll is the retry).
_BOUNDED = Config(connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1})
# The states a deploy ends in with the new template applied; *_ROLLBACK_COMPLETE ends with the old one.
APPLIED = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"})


class StackWatch:
    """Says when a deploy of the stack has completed since the last look: by CloudFormation's LastUpdatedTime
    (the emulator's CloudFormation gives none, so there the count of the stack's events stands in for it)."""

    def __init__(self, stack: str) -> None:
        self._stack = stack
        self._cloudformation = boto3.client("cloudformation", config=_BOUNDED)
        self._seen = self._look()

    def _look(self) -> tuple[str, str] | None:
        """(status, a mark that changes with every deploy), or None when CloudFormation did not answer."""
        try:
            stack = self._cloudformation.describe_stacks(StackName=self._stack)["Stacks"][0]
            mark = stack.get("LastUpdatedTime")
            if mark is None:
                events = self._cloudformation.describe_stack_events(StackName=self._stack)["StackEvents"]
                mark = len(events)
        except (BotoCoreError, ClientError, IndexError, KeyError):
            return None
        return str(stack["StackStatus"]), str(mark)

    def completed(self) -> str | None:
        """The status the stack reached if a deploy ended since the last call (``UPDATE_COMPLETE``,
        ``UPDATE_ROLLBACK_COMPLETE``, ...); None while nothing changed or a deploy is still under way."""
        now = self._look()
        if now is None or now == self._seen or not now[0].endswith("_COMPLETE"):
            return None
        self._seen = now
        return now[0]


def _consumer_key(consumer: DeployedConsumer) -> tuple[str, str]:
    return consumer.logical_id, consumer.source.queue_arn


def _stream_key(relay: DeployedStreamFunction) -> tuple[str, str]:
    return relay.logical_id, relay.source.stream_arn


class Pollers:
    """The runners of one `run`: one per SQS-triggered and one per stream-triggered function of the stack, as
    deployed now; :meth:`reload` brings them in line with a new deploy."""

    def __init__(self, stack: str, cdk_out: Path, log: IO[str], checkpoints: StreamCheckpoints,
                 faults: Callable[[], FaultPlan | None]) -> None:
        self._stack, self._cdk_out, self._log = stack, cdk_out, log
        self._checkpoints, self._faults = checkpoints, faults
        self._consumers: dict[tuple[str, str], tuple[DeployedConsumer, EventSourceRunner]] = {}
        self._relays: dict[tuple[str, str], tuple[DeployedStreamFunction, StreamEventSourceRunner]] = {}

    @property
    def runners(self) -> list[EventSourceRunner]:
        return [runner for _, runner in self._consumers.values()]

    @property
    def relays(self) -> list[StreamEventSourceRunner]:
        return [relay for _, relay in self._relays.values()]

    def start(self, consumers: list[DeployedConsumer], relays: list[DeployedStreamFunction]) -> None:
        new_relays = {_stream_key(r): (r, self._relay(r)) for r in relays}
        new_consumers = {_consumer_key(c): (c, self._runner(c)) for c in consumers}
        _together([*(r.start for _, r in new_relays.values()), *(c.start for _, c in new_consumers.values())])
        self._relays.update(new_relays)
        self._consumers.update(new_consumers)

    def stop(self) -> None:
        _together([*(r.stop for r in self.runners), *(r.stop for r in self.relays)])
        self._consumers.clear()
        self._relays.clear()

    def reload(self) -> str | None:
        """Read the deployed stack again and swap the runners of what changed; a line saying what was reloaded,
        or None when nothing the runners use changed."""
        make_skipped_configuration_sets(self._stack, self._cdk_out)  # a redeploy resets the function's variable
        consumers = {_consumer_key(c): c for c in read_consumers(self._stack, self._cdk_out)}
        relays = {_stream_key(r): r for r in read_stream_functions(self._stack, self._cdk_out)}
        changes: list[str] = []
        changed_relays = self._diff(self._relays, relays, changes)
        changed_consumers = self._diff(self._consumers, consumers, changes)
        if not changes:
            return None
        # Streams: the old runner stops first (it checkpoints what it finished), then the new one reads on.
        _together([self._relays.pop(key)[1].stop for key in changed_relays if key in self._relays])
        started_relays = {key: (relays[key], self._relay(relays[key])) for key in changed_relays if key in relays}
        # Queues: the new runner polls before the old one stops; the old one finishes its invocations.
        started = {key: (consumers[key], self._runner(consumers[key])) for key in changed_consumers
                   if key in consumers}
        _together([*(r.start for _, r in started_relays.values()), *(c.start for _, c in started.values())])
        self._relays.update(started_relays)
        retired = [self._consumers.pop(key)[1] for key in changed_consumers if key in self._consumers]
        self._consumers.update(started)
        _together([r.stop for r in retired])
        return f"redeploy of {self._stack} picked up: {'; '.join(changes)}"

    def _diff(self, running: Mapping[tuple[str, str], tuple[Any, Any]], deployed: Mapping[tuple[str, str], Any],
              changes: list[str]) -> list[tuple[str, str]]:
        """The keys whose runner must be replaced, started or stopped; each described in ``changes``."""
        keys = []
        for key in sorted(set(running) | set(deployed)):
            old = running[key][0] if key in running else None
            new = deployed.get(key)
            if old == new:
                continue
            keys.append(key)
            either = new if new is not None else old
            assert either is not None
            name = either.function.name
            if old is None:
                changes.append(f"{name} added")
            elif new is None:
                changes.append(f"{name} removed")
            else:
                changes.append(f"{name} ({', '.join(_what_changed(old, new))})")
        return keys

    def _runner(self, consumer: DeployedConsumer) -> EventSourceRunner:
        return EventSourceRunner(consumer.function, consumer.source, dict(os.environ), self._log, self._faults())

    def _relay(self, relay: DeployedStreamFunction) -> StreamEventSourceRunner:
        return StreamEventSourceRunner(relay.function, relay.source, dict(os.environ), self._log, self._checkpoints)


def _what_changed(old: DeployedConsumer | DeployedStreamFunction, new: DeployedConsumer | DeployedStreamFunction
                  ) -> list[str]:
    labels = {"environment": "environment", "code_dir": "code", "timeout_s": "timeout", "memory_mb": "memory",
              "handler": "handler"}
    found = [label for name, label in labels.items() if getattr(old.function, name) != getattr(new.function, name)]
    found += [name.replace("_", " ") for name in vars(old.source) if getattr(old.source, name) !=
              getattr(new.source, name)]
    return found or ["configuration"]


def _together(calls: list[Callable[[], Any]]) -> None:
    """Start or stop runners side by side (each starts or drains its own worker processes)."""
    if calls:
        with ThreadPoolExecutor() as pool:
            list(pool.map(lambda call: call(), calls))
