"""Every request the emulator answered, by service and operation, and SQS's by queue too: a scenario's AWS calls
per email, and the requests one queue cost (a pipeline's job queue apart from its evidence queue)."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from .wrap import wrap_once


class RequestCounts:
    """Every request the emulator answered, by service and operation (for a scenario's AWS calls per email)."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._by_queue: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, service: str, operation: str, queue_url: str | None = None) -> None:
        with self._lock:
            self._counts[service, operation] += 1
            if queue_url:
                self._by_queue[queue_name(queue_url), operation] += 1

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self._counts)

    def queue_snapshot(self) -> Counter[tuple[str, str]]:
        """SQS's requests by (queue name, operation)."""
        with self._lock:
            return Counter(self._by_queue)


def queue_name(queue_url: str) -> str:
    """The queue a URL names (its last path segment), however the client spelled the host."""
    return queue_url.rstrip("/").rsplit("/", 1)[-1]


REQUESTS = RequestCounts()


def count_requests() -> None:
    """Count each request moto dispatches to a service (idempotent)."""
    from moto.core.responses import BaseResponse

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call_action(self: Any) -> Any:
            try:
                service = str(self.service_name)
                queue_url = self._get_param("QueueUrl") if service == "sqs" else None
                REQUESTS.add(service, self._get_action(), queue_url if isinstance(queue_url, str) else None)
            except Exception:  # an operation moto cannot name is still answered as before
                REQUESTS.add(str(self.service_name), "unknown")
            return original(self)

        return call_action

    wrap_once(BaseResponse, "call_action", counted, "request counts")

