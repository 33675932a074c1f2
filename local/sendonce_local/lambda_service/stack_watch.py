"""When a deploy of the stack has completed: `sendonce-local run` then reloads the stack's runners
(:mod:`.stack_runners`), as Lambda applies a function's and a mapping's updates without a restart. A deploy that rolls
back leaves the stack as it was, so its runners stay as they are."""

from __future__ import annotations

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

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
