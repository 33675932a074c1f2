"""One Lambda execution environment: loads a handler from its code folder and runs the invocations it is sent.

Started by path (never imported from the package), so it sees what a Lambda sees: the code folder, the
function's environment and boto3. It reads one JSON request a line from fd ``argv[1]`` and writes one JSON
answer a line to fd ``argv[2]``; the handler's own stdout and stderr go wherever the runner pointed them.

A request may carry a fault: ``{"kill": "before_send" | "after_send", "nth": N}`` ends this process abruptly
(as a killed Lambda would) at the N-th SES SendEmail call of that invocation, before the call or after SES
has accepted it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

KILLED_EXIT = 137


class Context:
    """What Lambda hands a Python handler, with a real deadline."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.function_name = request["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = request.get("function_arn", "")
        self.memory_limit_in_mb = request.get("memory_mb", 128)
        self.aws_request_id = request["request_id"]
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = "local"
        self._deadline_ms = request["deadline_ms"]

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - time.time_ns() // 1_000_000)


class _Faults:
    """Kills the process around the N-th SendEmail call of the current invocation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.plan: dict[str, Any] | None = None
        self.calls = 0

    def arm(self, plan: dict[str, Any] | None) -> None:
        with self._lock:
            self.plan, self.calls = plan, 0

    def install(self) -> None:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        faults = self

        def make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            if operation_name != "SendEmail" or faults.plan is None:
                return original(client, operation_name, api_params)
            with faults._lock:
                faults.calls += 1
                hit = faults.calls == faults.plan["nth"]
                kind = faults.plan["kill"]
            if hit and kind == "before_send":
                os._exit(KILLED_EXIT)
            result = original(client, operation_name, api_params)
            if hit:
                os._exit(KILLED_EXIT)
            return result

        BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]


def main() -> None:
    requests_fd, answers_fd, code_dir, handler_name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    sys.path[0] = code_dir  # the code folder is all a Lambda has of its own
    module_name, _, attribute = handler_name.rpartition(".")
    faults = _Faults()
    faults.install()
    handler = getattr(importlib.import_module(module_name), attribute)
    requests = os.fdopen(requests_fd, "r", encoding="utf-8")
    answers = os.fdopen(answers_fd, "w", encoding="utf-8")
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        faults.arm(request.get("fault"))
        try:
            answer = {"ok": True, "result": handler(request["event"], Context(request))}
        except Exception as error:
            traceback.print_exc()
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        faults.arm(None)
        sys.stdout.flush()
        answers.write(json.dumps(answer, default=str) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
