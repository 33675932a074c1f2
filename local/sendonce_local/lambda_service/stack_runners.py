"""Load a stack deployed to the emulator and start its runners: one path for `sendonce-local run`, the demo and a
run's reloads.

:func:`load_stack` reads the stack as deployed (what the emulator's CloudFormation skipped made by API first);
:class:`StackRunners` plays its event sources, one runner per SQS-triggered and one per stream-triggered function.
A run follows redeploys (:mod:`.stack_watch` says when one completed): :meth:`StackRunners.reload` gives a
function or mapping that changed (environment, code asset, timeout, memory, batch size, concurrency) a new runner
with new execution environments; the old one stops taking records and finishes what it holds on the old version.
For a queue the new runner starts first (SQS hides what either holds, so nothing is lost or handled twice); for a
stream the old one stops first and the new one continues from its checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sendonce_contract.deploy_config import Env
from sendonce_contract.priority import Priority

from .checkpoints import StreamCheckpoints
from .deployed_stack import (
    DeployedConsumer,
    DeployedStreamFunction,
    read_event_sources,
    read_functions,
    read_template,
)
from .schedule_source import DeployedSchedule, ScheduleRunner, read_schedules
from .sqs_source import EventSourceRunner, FaultPlan
from .stack_gaps import make_skipped_configuration_sets
from .stream_source import StreamEventSourceRunner


@dataclass(frozen=True)
class DeployedStack:
    name: str
    template: dict[str, Any]  # as synthesized into cdk.out
    consumers: list[DeployedConsumer]  # its SQS-triggered functions
    stream_functions: list[DeployedStreamFunction]  # its DynamoDB-stream-triggered ones
    configuration_sets: list[str]  # made by API: the emulator's CloudFormation skips them
    schedules: list[DeployedSchedule] = field(default_factory=list)  # its rate(...) rules' targets
    unplayed_schedules: list[str] = field(default_factory=list)  # a line each for the rules not played

    def consumer(self, handler: str, lane: str | None = None) -> DeployedConsumer:
        """The SQS-triggered function whose handler is ``handler`` (one of the runtime's entry points); of a
        pipeline with ``urgent_lane``, the job queue's unless ``lane`` is ``"urgent"``."""
        found = [c for c in self.consumers if c.function.handler == handler
                 and (c.function.environment.get(Env.LANE) == Priority.URGENT.value) == (lane == Priority.URGENT.value)]
        if len(found) != 1:
            raise LookupError(f"stack {self.name} has {len(found)} SQS-triggered functions with handler {handler}")
        return found[0]


def load_stack(stack: str, cdk_out: Path) -> DeployedStack:
    """The stack as deployed to the emulator, code from ``cdk_out``; what its CloudFormation skipped is made by API
    first, so the functions read have it in their environment. A stack that cannot be read raises
    :class:`.deployed_stack.StackNotFound`, naming the stacks that can."""
    template = read_template(stack, cdk_out)
    configuration_sets = make_skipped_configuration_sets(stack, cdk_out)
    found = read_functions(stack, cdk_out)
    consumers, stream_functions = read_event_sources(stack, cdk_out, found)
    schedules, unplayed = read_schedules(template, {logical_id: function for logical_id, function, _ in found})
    return DeployedStack(stack, template, consumers, stream_functions, configuration_sets, schedules, unplayed)


def _consumer_key(consumer: DeployedConsumer) -> tuple[str, str]:
    return consumer.logical_id, consumer.source.queue_arn


def _stream_key(relay: DeployedStreamFunction) -> tuple[str, str]:
    return relay.logical_id, relay.source.stream_arn


class StackRunners:
    """The runners of a deployed stack's functions, in ``environment`` (the emulator's), their output to ``log``;
    ``faults`` gives each new SQS runner its fault plan, ``checkpoints`` keeps the stream positions."""

    def __init__(self, environment: Mapping[str, str], log: IO[str] | None,
                 checkpoints: StreamCheckpoints | None = None,
                 faults: Callable[[], FaultPlan | None] = lambda: None) -> None:
        self._environment, self._log = dict(environment), log
        self._checkpoints, self._faults = checkpoints, faults
        self._consumers: dict[tuple[str, str], tuple[DeployedConsumer, EventSourceRunner]] = {}
        self._relays: dict[tuple[str, str], tuple[DeployedStreamFunction, StreamEventSourceRunner]] = {}
        self._schedules: dict[str, tuple[DeployedSchedule, ScheduleRunner]] = {}

    @property
    def runners(self) -> list[EventSourceRunner]:
        return [runner for _, runner in self._consumers.values()]

    @property
    def relays(self) -> list[StreamEventSourceRunner]:
        return [relay for _, relay in self._relays.values()]

    def runner_of(self, consumer: DeployedConsumer) -> EventSourceRunner:
        return self._consumers[_consumer_key(consumer)][1]

    def start(self, consumers: list[DeployedConsumer], stream_functions: list[DeployedStreamFunction]
              ) -> StackRunners:
        """Start a runner for each (all of a stack's, or the few a demo phase plays), side by side: each starts its
        own worker processes."""
        new_relays = {_stream_key(r): (r, self._relay(r)) for r in stream_functions}
        new_consumers = {_consumer_key(c): (c, self._runner(c)) for c in consumers}
        _together([*(r.start for _, r in new_relays.values()), *(c.start for _, c in new_consumers.values())])
        self._relays.update(new_relays)
        self._consumers.update(new_consumers)
        return self

    def play_schedules(self, schedules: list[DeployedSchedule]) -> StackRunners:
        """Start playing each scheduled rule (EventBridge's part), replacing those of the same rules that changed."""
        changed = [s for s in schedules if self._schedules.get(s.rule, (None,))[0] != s]
        gone = [rule for rule in self._schedules if rule not in {s.rule for s in schedules}]
        _together([self._schedules.pop(rule)[1].stop for rule in [*gone, *(s.rule for s in changed)]
                   if rule in self._schedules])
        started = {s.rule: (s, ScheduleRunner(s, self._environment, self._log)) for s in changed}
        self._schedules.update(started)  # first: one whose start fails is still stopped with the others
        _together([runner.start for _, runner in started.values()])
        return self

    def stop(self) -> None:
        _together([*(r.stop for r in self.runners), *(r.stop for r in self.relays),
                   *(runner.stop for _, runner in self._schedules.values())])
        self._consumers.clear()
        self._relays.clear()
        self._schedules.clear()

    def reload(self, deployed: DeployedStack) -> str | None:
        """Swap the runners of what changed in ``deployed`` (the stack loaded again after a deploy); a line saying
        what was reloaded, or None when nothing the runners use changed."""
        consumers = {_consumer_key(c): c for c in deployed.consumers}
        relays = {_stream_key(r): r for r in deployed.stream_functions}
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
        return f"redeploy of {deployed.name} picked up: {'; '.join(changes)}"

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
        return EventSourceRunner(consumer.function, consumer.source, self._environment, self._log, self._faults())

    def _relay(self, relay: DeployedStreamFunction) -> StreamEventSourceRunner:
        return StreamEventSourceRunner(relay.function, relay.source, self._environment, self._log,
                                       self._checkpoints)


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
