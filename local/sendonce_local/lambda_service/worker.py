"""One Lambda execution environment: loads a handler from its code folder and runs the invocations it is sent.

Started by path (never imported from the package), so it sees what a Lambda sees: the code folder, the
function's environment and boto3. It reads one JSON request a line from fd ``argv[1]`` and writes one JSON
answer a line to fd ``argv[2]``; the handler's own stdout and stderr go wherever the runner pointed them.

A request may carry a fault: ``{"kill": KIND, "nth": N}``. The kill kinds end this process abruptly (as a killed
Lambda would) at the N-th watched call of that invocation: before the claim (PutItem), before SendEmail, after
SES accepted (SendEmail returned), after SENT was recorded (UpdateItem returned), after a delayed copy was sent
(SendMessage returned: killed between the copy and the acknowledgement). The answer kinds break SES's
answer and let the worker live: lost after acceptance (a read timeout), a 5xx after acceptance, a 5xx without
sending. See ``FAULT_KINDS``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
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
        self._deadline_ms = int(request["deadline_ms"])

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - time.time_ns() // 1_000_000)


# Fault kinds: the AWS call each one watches, and what happens at its N-th call in an invocation.
KILL_BEFORE = {"before_claim": "PutItem", "before_send": "SendEmail"}  # the process dies before the call
KILL_AFTER = {"after_send": "SendEmail", "after_sent": "UpdateItem",  # ... or right after it returned
              # a delayed copy sent, the original not yet acknowledged (a batch's parked jobs: their copies)
              "after_copy": ("SendMessage", "SendMessageBatch")}
# SES's answer goes wrong and the worker lives: "lost_answer" and "accepted_then_server_error" after SES
# accepted the email, "server_error" without sending it.
BROKEN_ANSWERS = {"lost_answer": True, "accepted_then_server_error": True, "server_error": False}
# The crash points the demo draws from; "after_copy" is armed by the fault bursts only (demo/scenarios/fault_burst.py).
FAULT_KINDS = (*KILL_BEFORE, *(k for k in KILL_AFTER if k != "after_copy"), *BROKEN_ANSWERS)


class _Faults:
    """Ends the process, or breaks SES's answer, at the N-th watched call of the current invocation."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.plan: dict[str, Any] | None = None
        self.calls = 0
        self.fired = False  # told to the runner, so a forced fault the invocation never reached is armed again

    def arm(self, plan: dict[str, Any] | None) -> None:
        with self._lock:
            self.plan, self.calls, self.fired = plan, 0, False

    def _hit(self, operation_name: str) -> str | None:
        with self._lock:
            if self.plan is None:
                return None
            kind: str = self.plan["kill"]
            watched = {**KILL_BEFORE, **KILL_AFTER}.get(kind, "SendEmail")
            if operation_name not in ((watched,) if isinstance(watched, str) else watched):
                return None
            self.calls += 1
            if self.calls != self.plan["nth"]:
                return None
            self.fired = True
            return kind

    def install(self) -> None:
        from botocore.client import BaseClient
        from botocore.exceptions import ClientError, ReadTimeoutError

        original = vars(BaseClient)["_make_api_call"]  # botocore's one entry for every AWS call
        faults = self

        def make_api_call(client: Any, operation_name: str, api_params: Any) -> Any:
            kind = faults._hit(operation_name)
            if kind is None:
                return original(client, operation_name, api_params)
            if kind in KILL_BEFORE:
                os._exit(KILLED_EXIT)
            if kind == "server_error":
                raise ClientError(_server_error("played 5xx"), operation_name)
            original(client, operation_name, api_params)  # the call goes through; its answer never arrives
            if kind in KILL_AFTER:
                os._exit(KILLED_EXIT)
            if kind == "lost_answer":
                raise ReadTimeoutError(endpoint_url=client.meta.endpoint_url)
            raise ClientError(_server_error("played 5xx after acceptance"), operation_name)

        setattr(BaseClient, "_make_api_call", make_api_call)  # noqa: B010 (a private name: no attribute to type)


def _server_error(message: str) -> Any:
    return {"Error": {"Code": "InternalFailure", "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 500}}


def main() -> None:
    requests_fd, answers_fd, code_dir, handler_name = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    # Ctrl-C in the terminal is for `run`, which ends its execution environments itself (as Lambda does, never the
    # user's keyboard); without this every idle worker printed a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
        answer["fault_fired"] = faults.fired
        faults.arm(None)
        sys.stdout.flush()
        answers.write(json.dumps(answer, default=str) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
