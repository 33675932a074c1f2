"""DynamoDB, SQS and S3 behind a proxy that answers late, or refuses, for a stretch: the faults a slow network or a
throttled table bring, which the emulator cannot be asked for (the tests and the fault bursts use it).

A late answer is carried out first and answered after ``late_s``: a client whose read timeout is shorter gives
up although the request was carried out, which is the case that matters (a lost answer is not a failure). With
``late_s=None`` the connection is closed without an answer once the request is carried out: the answer is lost at
once, whatever the client's read timeout, so a test can give its clients a read timeout no loaded host reaches
and still lose exactly the answers it means to. A refusal is answered at once with the error code given, as
DynamoDB's throttling is. ``UNPROCESSED`` plays a throttled table's ``BatchWriteItem``: it carries out the first
request for each table and answers the others as ``UnprocessedItems``, as DynamoDB does under throttling.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass

from .proxy import Forward, ForwardingProxy, ProxiedRequest, Reply, error_reply

LATE = "late"
UNPROCESSED = "unprocessed"  # BatchWriteItem only: all but each table's first request left unprocessed


# S3's object calls by their HTTP method (a path-style request to /bucket/key).
_S3_OPERATIONS = {"GET": "GetObject", "PUT": "PutObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}


@dataclass(frozen=True)
class Rule:
    service: str  # "dynamodb", "sqs", "s3"
    operation: str | None  # "PutItem", "SendMessage", "GetObject", ... or None for every operation of the service
    fault: str  # LATE, or an error code answered with ``status``
    status: int = 400


def operation_of(request: ProxiedRequest) -> str:
    if request.service == "s3":
        return _S3_OPERATIONS.get(request.method, request.method)
    target = request.headers.get("X-Amz-Target", request.headers.get("x-amz-target", ""))
    return target.rpartition(".")[2]


class SlowServices(ForwardingProxy):
    def __init__(self, upstream: str, late_s: float | None = 0.5) -> None:
        self.late_s = late_s
        self._rules: list[Rule] = []
        self._until = 0.0
        self._lock = threading.Lock()
        self.hits: Counter[tuple[str, str, str]] = Counter()  # requests that met a fault
        self.requests: Counter[str] = Counter()  # every request, by service
        super().__init__(upstream, self._behave)

    def fault(self, *rules: Rule, for_s: float = 3600.0) -> None:
        """From now on and for ``for_s`` seconds, requests matching a rule get its fault."""
        with self._lock:
            self._rules, self._until = list(rules), time.monotonic() + for_s

    def clear(self) -> None:
        self.fault(for_s=0)

    def _match(self, request: ProxiedRequest) -> Rule | None:
        with self._lock:
            self.requests[request.service] += 1
            if time.monotonic() >= self._until:
                return None
            operation = operation_of(request)
            for rule in self._rules:
                if rule.service == request.service and rule.operation in (None, operation):
                    self.hits[rule.service, operation, rule.fault] += 1
                    return rule
        return None

    def _behave(self, request: ProxiedRequest, forward: Forward) -> Reply | None:
        rule = self._match(request)
        if rule is None:
            return forward()
        if rule.fault == UNPROCESSED:
            return self._first_of_each_table(request)
        if rule.fault == LATE:
            reply = forward()
            if self.late_s is None:
                return None  # carried out, the connection closed unanswered
            time.sleep(self.late_s)  # the client gave up already; the write happened
            return reply
        if request.service == "s3":  # S3 answers errors in XML
            body = f"<Error><Code>{rule.fault}</Code><Message>played {rule.fault}</Message></Error>".encode()
            return Reply(rule.status, [("Content-Type", "application/xml")], body)
        return error_reply(rule.status, rule.fault, {"__type": rule.fault, "message": f"played {rule.fault}"},
                           "application/x-amz-json-1.0")

    def _first_of_each_table(self, request: ProxiedRequest) -> Reply:
        """A BatchWriteItem carried out for each table's first request; the rest answered as unprocessed."""
        asked = json.loads(request.body)
        taken = {table: requests[:1] for table, requests in asked["RequestItems"].items()}
        left = {table: requests[1:] for table, requests in asked["RequestItems"].items() if requests[1:]}
        body = json.dumps({**asked, "RequestItems": taken}).encode()
        headers = {name: value for name, value in request.headers.items() if name.lower() != "content-length"}
        reply = self.forward(ProxiedRequest(request.method, request.path, headers, body))
        answer = {**json.loads(reply.body), "UnprocessedItems": left}
        # The upstream's checksum was of its own body: none for the one played.
        answered = [(name, value) for name, value in reply.headers if name.lower() != "x-amz-crc32"]
        return Reply(reply.status, answered, json.dumps(answer).encode())
