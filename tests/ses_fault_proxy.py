"""SES behind a proxy that answers each SendEmail with a scripted fault.

It is how the tests make SES throttle, refuse, fail with a 5xx, or accept a message and then never answer
(a read timeout after acceptance) or drop the connection: the cases a real endpoint cannot be asked for.
"""

from __future__ import annotations

import collections
import enum
import threading
from collections.abc import Callable

from sendonce_local.emulator.proxy import Forward, ForwardingProxy, ProxiedRequest, Reply, error_reply

SEND_PATH = "/v2/email/outbound-emails"
HOLD_LIMIT_S = 30  # a held response is released at the latest by stop(), or after this


class Fault(enum.Enum):
    PASS = "pass"
    THROTTLE = "throttle"
    QUOTA = "quota"  # SES's 24-hour sending quota is used up
    SENDING_PAUSED = "sending_paused"
    CONFIGURATION_SET_MISSING = "configuration_set_missing"  # SES's NotFoundException for the request's set
    REJECT = "reject"
    TEMPLATE_MISSING = "template_missing"
    SERVER_ERROR = "server_error"
    ACCEPT_THEN_HANG = "accept_then_hang"
    ACCEPT_THEN_DROP = "accept_then_drop"
    ACCEPT_THEN_SERVER_ERROR = "accept_then_server_error"  # SES sent it, then answered 5xx


_ERRORS = {
    Fault.THROTTLE: (429, "TooManyRequestsException", "Maximum sending rate exceeded."),
    Fault.QUOTA: (400, "LimitExceededException", "Daily message quota exceeded."),
    Fault.SENDING_PAUSED: (400, "SendingPausedException", "Sending is paused for this account."),
    Fault.REJECT: (400, "MessageRejected", "Email address is on the suppression list."),
    Fault.TEMPLATE_MISSING: (404, "NotFoundException", "Template receipt-v2 does not exist."),
    Fault.CONFIGURATION_SET_MISSING: (404, "NotFoundException", "Configuration set <name> does not exist."),
    Fault.SERVER_ERROR: (500, "InternalFailure", "The request processing has failed."),
}


def _scripted_error(fault: Fault) -> Reply:
    status, code, message = _ERRORS[fault]
    return error_reply(status, code, {"message": message}, "application/json")


class SesFaultProxy(ForwardingProxy):
    def __init__(self, upstream: str) -> None:
        self._faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self._meanwhile: collections.deque[Callable[[], object]] = collections.deque()
        self.meanwhile_errors: list[BaseException] = []  # the conftest fixture raises the first after the test
        self.send_requests = 0
        super().__init__(upstream, self._behave)

    def stop(self) -> None:
        self._release.set()  # a held answer ends first, so the server's shutdown does not wait for it
        super().stop()

    def script(self, *faults: Fault) -> None:
        """The next SendEmail calls get these faults, in order; after them, calls pass."""
        with self._lock:
            self._faults.extend(faults)

    def meanwhile(self, action: Callable[[], object]) -> None:
        """Run ``action`` when the next SendEmail arrives, before SES sees it: what happens elsewhere while a worker
        waits for SES's answer (an SES event of another email reaching the recorder, say)."""
        with self._lock:
            self._meanwhile.append(action)

    def pending(self) -> int:
        """Scripted faults not met yet."""
        with self._lock:
            return len(self._faults)

    def clear(self) -> None:
        """Drop the scripted faults not met yet: from now on, calls pass."""
        with self._lock:
            self._faults.clear()

    def _run_meanwhile(self) -> None:
        with self._lock:
            action = self._meanwhile.popleft() if self._meanwhile else None
        if action is None:
            return
        try:
            action()
        except BaseException as error:  # the test hears of it, not the proxy's thread
            self.meanwhile_errors.append(error)

    def _next_fault(self) -> Fault:
        with self._lock:
            self.send_requests += 1
            return self._faults.popleft() if self._faults else Fault.PASS

    def _behave(self, request: ProxiedRequest, forward: Forward) -> Reply | None:
        sending = request.path.startswith(SEND_PATH)
        if sending:
            self._run_meanwhile()
        fault = self._next_fault() if sending else Fault.PASS
        if fault in _ERRORS:
            return _scripted_error(fault)
        reply = forward()
        if fault is Fault.ACCEPT_THEN_HANG:
            self._release.wait(HOLD_LIMIT_S)
            return None
        if fault is Fault.ACCEPT_THEN_DROP:
            return None
        if fault is Fault.ACCEPT_THEN_SERVER_ERROR:
            return _scripted_error(Fault.SERVER_ERROR)
        return reply
