"""7. Per instance, under network latency: a proxy in front of the emulator delays each request."""

from __future__ import annotations

import os
import statistics
import time
import uuid
from typing import Any

from consumers import factory

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record

LATENCY_CONSUMERS = {
    "sendonce, parallelism 1": ("sendonce", 1),
    "sendonce, parallelism 10": ("sendonce", 10),
    "Powertools reference": ("powertools", 1),
    "send-only baseline": ("baseline", 1),
}
EMULATOR_FLOOR = "sendonce, parallelism 10, no injected delay (the emulator's own cost)"


def delayed(delays_ms: dict[str, float]) -> Any:
    """A proxy behaviour: each request waits its service's round trip before it is forwarded."""

    def behave(request: Any, forward: Any) -> Any:
        time.sleep(delays_ms.get(request.service, delays_ms["other"]) / 1000)
        return forward()

    return behave


def latency_run(names: dict[str, str], batches: int, delays_ms: dict[str, float]) -> dict[str, dict[str, float]]:
    """One instance per consumer, batches of ten first sends through a delaying proxy: rate and batch latency."""
    from sendonce_local.emulator.proxy import ForwardingProxy

    proxy = ForwardingProxy(os.environ["AWS_ENDPOINT_URL"], delayed(delays_ms)).start()
    direct = os.environ["AWS_ENDPOINT_URL"]
    # The same consumer straight to the emulator: what the emulator itself costs a batch, with no network delay.
    floor = {EMULATOR_FLOOR: factory("sendonce", names, 10)()[0]}
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint  # clients made now go through the proxy
    try:
        handlers = {label: factory(kind, names, parallelism)()[0]
                    for label, (kind, parallelism) in LATENCY_CONSUMERS.items()}
    finally:
        os.environ["AWS_ENDPOINT_URL"] = direct
    handlers.update(floor)
    latencies: dict[str, list[float]] = {label: [] for label in handlers}
    try:
        for _ in range(batches):
            for label, handler in handlers.items():  # interleaved, so drift hits all alike
                prefix = uuid.uuid4().hex[:8]
                batch = [record(job(f"{prefix}:{n}")) for n in range(10)]
                started = time.perf_counter()
                handler({"Records": batch}, Context())
                latencies[label].append((time.perf_counter() - started) * 1000)
    finally:
        proxy.stop()
    results = {}
    for label, values in latencies.items():
        ordered = sorted(values)
        results[label] = {
            "records_per_s": 10 * len(values) / (sum(values) / 1000),
            "p50_ms": statistics.median(ordered),
            "p90_ms": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
        }
    return results
