"""Lambda execution environments as worker processes: Lambda's reserved variables set, the handler imported before
the first invocation (the init phase, which no invocation's timeout counts), then invoked with a real deadline and
killed when it passes."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import select
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sendonce_runtime.shell import FUNCTION_NAME_VARIABLE

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
STARTUP_BOUND_S = 60
# A handler's answer may arrive a little after its deadline while the process winds down; Lambda's own
# cut-off is the timeout, so past this grace the worker is treated as timed out and killed.
ANSWER_GRACE_S = 0.25
EXIT_BOUND_S = 5  # from a worker's answer pipe closing to its exit


@dataclass(frozen=True)
class FunctionSpec:
    """What the runner needs of a deployed function: where its code is, how to call it, and its limits."""

    name: str
    handler: str
    code_dir: Path
    environment: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 3.0
    memory_mb: int = 128
    arn: str = ""


class Ending(enum.Enum):
    RETURNED = "returned"  # the handler returned a value
    RAISED = "raised"  # the handler raised: Lambda reports a function error
    KILLED = "killed"  # the process died mid-invocation
    TIMED_OUT = "timed_out"  # the deadline passed; the process was killed


@dataclass(frozen=True)
class Invocation:
    ending: Ending
    result: Any = None
    error: str | None = None
    fault_fired: bool = False  # the armed fault was reached (a killed worker was killed by it)


def _file_or_devnull(log: IO[str] | None) -> IO[str] | int:
    """The function's output goes to ``log`` if it is a real file (a worker process needs a descriptor)."""
    if log is None:
        return subprocess.DEVNULL
    try:
        log.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return subprocess.DEVNULL
    return log


class LambdaInstance:
    """One execution environment: a worker process that keeps its module state between invocations."""

    def __init__(self, function: FunctionSpec, base_environment: Mapping[str, str], log: IO[str] | None) -> None:
        self._function = function
        self._environment = {**base_environment, **function.environment}
        self._log = log
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: IO[str] | None = None
        self._answers: IO[str] | None = None

    def start(self) -> None:
        requests_read, requests_write = os.pipe()
        answers_read, answers_write = os.pipe()
        environment = {**os.environ, **self._environment, **self._reserved_variables(), "PYTHONUNBUFFERED": "1"}
        output = _file_or_devnull(self._log)
        self._process = subprocess.Popen(
            [sys.executable, str(WORKER_SCRIPT), str(requests_read), str(answers_write),
             str(self._function.code_dir), self._function.handler],
            pass_fds=(requests_read, answers_write),
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
        os.close(requests_read)
        os.close(answers_write)
        self._requests = os.fdopen(requests_write, "w", encoding="utf-8")
        self._answers = os.fdopen(answers_read, "r", encoding="utf-8")
        ready = self._read_answer(STARTUP_BOUND_S)
        if not ready or not ready.get("ready"):
            self.close()
            raise RuntimeError(f"the function {self._function.name} did not start; see the consumer log")

    def _reserved_variables(self) -> dict[str, str]:
        """What Lambda sets in every execution environment, over the function's own: a handler may tell it runs in
        one (the runtime then builds its clients at import, in the init phase, outside any invocation's timeout)."""
        return {
            FUNCTION_NAME_VARIABLE: self._function.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self._function.memory_mb),
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{self._function.name}",
            "LAMBDA_TASK_ROOT": str(self._function.code_dir),
            "_HANDLER": self._function.handler,
        }

    def invoke(self, event: dict[str, Any], fault: dict[str, Any] | None = None) -> Invocation:
        if self._process is None or self._process.poll() is not None:
            self.start()
        assert self._requests is not None
        deadline_ms = time.time_ns() // 1_000_000 + int(self._function.timeout_s * 1000)
        request = {
            "event": event,
            "deadline_ms": deadline_ms,
            "function_name": self._function.name,
            "function_arn": self._function.arn,
            "memory_mb": self._function.memory_mb,
            "request_id": str(uuid.uuid4()),
            "fault": fault,
        }
        try:
            self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
        except BrokenPipeError:
            self._restart()
            return Invocation(Ending.KILLED)  # died before this invocation: its fault was never reached
        answer = self._read_answer(self._function.timeout_s + ANSWER_GRACE_S)
        if answer is None:
            process = self._process
            ending = Ending.KILLED if process is not None and process.poll() is not None else Ending.TIMED_OUT
            self._restart()
            # A worker dies mid-invocation only by its fault's kill; a timed-out one may never have reached it.
            return Invocation(ending, fault_fired=ending is Ending.KILLED and fault is not None)
        fired = bool(answer.get("fault_fired"))
        if answer.get("ok"):
            return Invocation(Ending.RETURNED, result=answer.get("result"), fault_fired=fired)
        return Invocation(Ending.RAISED, error=answer.get("error"), fault_fired=fired)

    def _read_answer(self, bound_s: float) -> dict[str, Any] | None:
        """The worker's next answer line, or None if it died or said nothing within ``bound_s``."""
        assert self._answers is not None
        readable, _, _ = select.select([self._answers], [], [], max(0.0, bound_s))
        if not readable:
            return None
        line = self._answers.readline()
        if not line and self._process is not None:
            # The pipe closes as the process exits, a moment before it can be reaped: reaped here, a kill is not
            # taken for a timeout (on a loaded machine poll() still found it running, and a forced fault that had
            # fired was armed again).
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=EXIT_BOUND_S)
        return json.loads(line) if line else None

    def _restart(self) -> None:
        self.close()
        self.start()

    def close(self) -> None:
        for stream in (self._requests, self._answers):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._requests = self._answers = None
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None
