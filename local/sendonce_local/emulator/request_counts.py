"""Every request the emulator answered, by service and operation: a scenario's AWS calls per email."""

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
        self._lock = threading.Lock()

    def add(self, service: str, operation: str) -> None:
        with self._lock:
            self._counts[service, operation] += 1

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self._counts)


REQUESTS = RequestCounts()


def count_requests() -> None:
    """Count each request moto dispatches to a service (idempotent)."""
    from moto.core.responses import BaseResponse

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call_action(self: Any) -> Any:
            try:
                REQUESTS.add(str(self.service_name), self._get_action())
            except Exception:  # an operation moto cannot name is still answered as before
                REQUESTS.add(str(self.service_name), "unknown")
            return original(self)

        return call_action

    wrap_once(BaseResponse, "call_action", counted, "request counts")

