"""A proxy between the consumer's SES client and the emulator that answers each SendEmail with a scripted fault.

It is how the tests make SES throttle, refuse, fail with a 5xx, or accept a message and then never answer
(a read timeout after acceptance) or drop the connection: the cases a real endpoint cannot be asked for.
"""

from __future__ import annotations

import collections
import enum
import http.client
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

SEND_PATH = "/v2/email/outbound-emails"
HOLD_LIMIT_S = 30  # a held response is released at the latest by stop(), or after this


class Fault(enum.Enum):
    PASS = "pass"
    THROTTLE = "throttle"
    SENDING_PAUSED = "sending_paused"
    REJECT = "reject"
    TEMPLATE_MISSING = "template_missing"
    SERVER_ERROR = "server_error"
    ACCEPT_THEN_HANG = "accept_then_hang"
    ACCEPT_THEN_DROP = "accept_then_drop"


_ERRORS = {
    Fault.THROTTLE: (429, "TooManyRequestsException", "Maximum sending rate exceeded."),
    Fault.SENDING_PAUSED: (400, "SendingPausedException", "Sending is paused for this account."),
    Fault.REJECT: (400, "MessageRejected", "Email address is on the suppression list."),
    Fault.TEMPLATE_MISSING: (404, "NotFoundException", "Template receipt-v2 does not exist."),
    Fault.SERVER_ERROR: (500, "InternalFailure", "The request processing has failed."),
}


class SesFaultProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "localhost", parts.port or 80)
        self._faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.send_requests = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.endpoint = f"http://localhost:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> SesFaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def script(self, *faults: Fault) -> None:
        """The next SendEmail calls get these faults, in order; after them, calls pass."""
        with self._lock:
            self._faults.extend(faults)

    def _next_fault(self) -> Fault:
        with self._lock:
            self.send_requests += 1
            return self._faults.popleft() if self._faults else Fault.PASS

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                fault = proxy._next_fault() if self.path.startswith(SEND_PATH) else Fault.PASS
                if fault in _ERRORS:
                    status, code, message = _ERRORS[fault]
                    payload = json.dumps({"message": message}).encode()
                    self._reply(status, [("x-amzn-ErrorType", code), ("Content-Type", "application/json")], payload)
                    return
                status, upstream_headers, payload = proxy._forward("POST", self.path, headers, body)
                if fault is Fault.ACCEPT_THEN_HANG:
                    proxy._release.wait(HOLD_LIMIT_S)
                    return
                if fault is Fault.ACCEPT_THEN_DROP:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
                kept = [(k, v) for k, v in upstream_headers if k.lower() not in ("connection", "content-length")]
                self._reply(status, kept, payload)

            do_GET = do_POST

            def _reply(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
                # Headers and body in one write, with Nagle off: a split write stalls ~40 ms per call.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, '')}"]
                lines += [f"{k}: {v}" for k, v in headers]
                lines += [f"Content-Length: {len(payload)}", "Connection: close", "", ""]
                self.wfile.write("\r\n".join(lines).encode() + payload)
                self.close_connection = True

        return Handler
