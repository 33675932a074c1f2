"""EventBridge's scheduled rules, played: moto keeps a rule's ``ScheduleExpression`` but never fires it, so a
deployed stack's schedule watch (and quota watch) would never run. Each rule of the stack with a ``rate(...)``
schedule and one of the stack's functions as its target invokes that function once a period, in an execution
environment of its own (a worker process, as :mod:`.instances` starts them), with the event EventBridge sends
(``detail-type`` "Scheduled Event", AWS's documented shape). A ``cron(...)`` schedule is not played, and said so.
"""

from __future__ import annotations

import contextlib
import re
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from .instances import STARTUP_BOUND_S, Ending, FunctionSpec, LambdaInstance

_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_S = {"minute": 60, "hour": 3_600, "day": 86_400}


@dataclass(frozen=True)
class DeployedSchedule:
    function: FunctionSpec
    every_s: float
    rule: str  # the rule's logical id


def rate_seconds(expression: str) -> float | None:
    """A ``rate(...)`` expression's period in seconds; None for anything else (a cron expression)."""
    match = _RATE.match(expression.strip())
    if match is None:
        return None
    return int(match[1]) * _UNIT_S[match[2].rstrip("s")]


def read_schedules(template: dict[str, Any], functions: dict[str, FunctionSpec]) -> tuple[list[DeployedSchedule],
                                                                                          list[str]]:
    """The stack's scheduled rules that target one of its ``functions`` (by logical id), and a line for each
    scheduled rule that is not played."""
    played, skipped = [], []
    for logical_id, resource in template.get("Resources", {}).items():
        properties = resource.get("Properties", {})
        if resource.get("Type") != "AWS::Events::Rule" or "ScheduleExpression" not in properties:
            continue
        if properties.get("State", "ENABLED") != "ENABLED":
            continue
        every_s = rate_seconds(properties["ScheduleExpression"])
        for target in properties.get("Targets", []):
            arn = target.get("Arn")
            function_id = arn["Fn::GetAtt"][0] if isinstance(arn, dict) and "Fn::GetAtt" in arn else None
            if function_id not in functions:
                continue
            if every_s is None:
                skipped.append(f"{logical_id}: {properties['ScheduleExpression']} is not played (rate only)")
                continue
            played.append(DeployedSchedule(functions[function_id], every_s, logical_id))
    return played, skipped


def scheduled_event(rule_arn: str, region: str, account: str) -> dict[str, Any]:
    """The event EventBridge sends a scheduled rule's target, now."""
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": account, "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": region,
            "resources": [rule_arn], "detail": {}}


class ScheduleRunner:
    """Invokes the schedule's function once a period until stopped; the first run a period after the start, as
    EventBridge's first after a rule is created."""

    def __init__(self, schedule: DeployedSchedule, environment: dict[str, str], log: IO[str] | None,
                 every_s: float | None = None) -> None:
        self.schedule = schedule
        self._every_s = every_s or schedule.every_s
        self._instance = LambdaInstance(schedule.function, environment, log)
        self._log = log
        region = environment.get("AWS_REGION", environment.get("AWS_DEFAULT_REGION", "us-east-1"))
        account = environment.get("CDK_DEFAULT_ACCOUNT", "123456789012")
        self._rule_arn, self._region, self._account = (f"arn:aws:events:{region}:{account}:rule/{schedule.rule}",
                                                       region, account)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"schedule {schedule.rule}", daemon=True)
        self.runs = 0

    def start(self) -> None:
        self._instance.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        # An invocation under way ends by its timeout; a worker restarting after one, within its startup bound.
        self._thread.join(timeout=self.schedule.function.timeout_s + STARTUP_BOUND_S + 5)
        self._instance.close()

    def _loop(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                invocation = self._instance.invoke(scheduled_event(self._rule_arn, self._region, self._account))
            except (OSError, RuntimeError) as error:  # a worker that would not start: the next period tries again
                self._say(f"{self.schedule.rule}: {self.schedule.function.name} did not run ({error})")
                continue
            self.runs += 1
            if invocation.ending is not Ending.RETURNED:  # EventBridge does not retry (the rule asks for none)
                self._say(f"{self.schedule.rule}: {self.schedule.function.name} {invocation.ending.value}"
                          + (f": {invocation.error}" if invocation.error else ""))

    def _say(self, line: str) -> None:
        if self._log is not None:
            with contextlib.suppress(OSError, ValueError):
                self._log.write(f"schedule {line}\n")
                self._log.flush()
