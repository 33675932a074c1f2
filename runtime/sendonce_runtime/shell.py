"""The shell every bundled function's handler shares: its parts built once per execution environment (from its
config, read from the environment, and its boto3 clients), and its log, one JSON line per write on stdout, which
CloudWatch Logs keeps as one event and, with a pipeline name, reads as an Embedded Metric Format document.

A handler module holds ``_app = Once(build)`` and calls ``_app.get().handle(event, context)``. In a Lambda execution
environment it is built at import, in Lambda's init phase, which no invocation's timeout counts: a cold start's
clients and wiring (a second or more for five clients on a loaded, fractional CPU) would otherwise come out of the
first batch's time, and a record's wait for its send slot with them (docs: sending rate). Anywhere else nothing is
built at import, so a test imports the module freely, and the first call builds it under a lock (the batch's
threads share it afterwards).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TextIO, TypeVar

from .metrics import emf_document

T = TypeVar("T")


# A reserved variable Lambda sets in every execution environment it starts (and the local runner's workers too).
FUNCTION_NAME_VARIABLE = "AWS_LAMBDA_FUNCTION_NAME"


class Once(Generic[T]):
    """``build()``'s result, kept for the execution environment's life: made at once inside one (its init phase),
    on first use elsewhere."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._built: T | None = None
        if os.environ.get(FUNCTION_NAME_VARIABLE):
            # A build that fails here is tried again by the first invocation, which fails with its traceback (a
            # function error, the batch retried), as it did when nothing was built at import.
            with contextlib.suppress(Exception):
                self.get()

    def get(self) -> T:
        with self._lock:
            if self._built is None:
                self._built = self._build()
            return self._built


class JsonLog:
    """One JSON line per write on ``stream`` (stdout when None), whole lines even from the batch's threads."""

    def __init__(self, stream: TextIO | None = None, pipeline: str | None = None) -> None:
        self._stream = stream
        self.pipeline = pipeline  # the metrics' Pipeline dimension: no metrics without it
        self._lock = threading.Lock()

    def write(self, line: dict[str, Any], counts: Sequence[str] = (), timings: Mapping[str, float] | None = None,
              values: Mapping[str, int] | None = None) -> None:
        """``line``, made an EMF document when there is a pipeline: a count of 1 for each name in ``counts``,
        ``timings`` in milliseconds, and ``values`` overriding the counts' 1s."""
        if self.pipeline is not None:
            line.update(emf_document(self.pipeline, list(counts), timings or {}, time.time_ns() // 1_000_000))
        line.update(values or {})
        self.emit(line)

    def emit(self, line: Mapping[str, Any]) -> None:
        text = json.dumps(line, ensure_ascii=False) + "\n"
        stream = self._stream or sys.stdout
        with self._lock:
            stream.write(text)
            stream.flush()
