"""A forwarding HTTP proxy in front of the emulator, whose behaviour per request is a function you give it.

The tests make SES fail in ways a real endpoint cannot be asked to (accept, then hang or drop the connection);
the benchmarks add a fixed network delay per service. Responses go out in one write with Nagle off: a
split write stalls about 40 ms per call on loopback.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

_HOP_BY_HOP = ("connection", "content-length", "transfer-encoding", "keep-alive")


@dataclass(frozen=True)
class ProxiedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def service(self) -> str:
        """Which AWS service the request is for: 'dynamodb', 'sqs', 'sesv2', 's3' or 'other'."""
        target = self.headers.get("X-Amz-Target", self.headers.get("x-amz-target", ""))
        if target.startswith("DynamoDB"):
            return "dynamodb"
        if target.startswith("AmazonSQS"):
            return "sqs"
        if self.path.startswith("/v2/email/"):
            return "sesv2"
        # S3's REST calls name no target: its signature's credential scope names the service.
        authorization = self.headers.get("Authorization", self.headers.get("authorization", ""))
        return "s3" if "/s3/aws4_request" in authorization else "other"


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


Forward = Callable[[], Reply]
# Given the request and a way to forward it, return the reply to send, or None to close without one.
Behaviour = Callable[[ProxiedRequest, Forward], Reply | None]


def pass_through(request: ProxiedRequest, forward: Forward) -> Reply | None:
    return forward()


def error_reply(status: int, code: str, body: dict[str, str], content_type: str) -> Reply:
    """An AWS error as the SDKs read it: the error code in ``x-amzn-ErrorType``, beside the service's JSON body."""
    return Reply(status, [("x-amzn-ErrorType", code), ("Content-Type", content_type)], json.dumps(body).encode())


SHUTDOWN_POLL_S = 0.02


class _Server(ThreadingHTTPServer):
    # The default backlog of 5 drops SYNs when ten sends connect at once, and a dropped SYN waits a second.
    request_queue_size = 128


class ForwardingProxy:
    """Forwards each request to ``upstream`` as ``behaviour`` decides; a fault proxy subclasses it with its own."""

    def __init__(self, upstream: str, behaviour: Behaviour = pass_through) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname or "localhost", parts.port or 80)
        self.behaviour = behaviour
        self._server = _Server(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.endpoint = f"http://localhost:{self._server.server_address[1]}"
        # serve_forever checks for shutdown every poll interval (0.5 s by default): each stop waited that long.
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S},
                                        daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def forward(self, request: ProxiedRequest) -> Reply:
        connection = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            connection.request(request.method, request.path, body=request.body, headers=request.headers)
            response = connection.getresponse()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return Reply(response.status, headers, response.read())
        finally:
            connection.close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                request = ProxiedRequest(self.command, self.path, headers, body)
                reply = proxy.behaviour(request, lambda: proxy.forward(request))
                if reply is None:
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    self._reply(reply)
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def _reply(self, reply: Reply) -> None:
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                lines = [f"HTTP/1.1 {reply.status} {http.client.responses.get(reply.status, '')}"]
                lines += [f"{k}: {v}" for k, v in reply.headers]
                lines += [f"Content-Length: {len(reply.body)}", "Connection: close", "", ""]
                self.wfile.write("\r\n".join(lines).encode() + reply.body)

        return Handler
