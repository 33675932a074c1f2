"""10. The consumer's own floor, against a fast stub endpoint (bench/stub_aws.py) in its own process."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
import uuid

import consumers
from plan import ROOT

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record


def floor_run(batches: int, delays_ms: dict[str, float]) -> dict[str, float]:
    """Batches of ten first sends at parallelism 10 against bench/stub_aws.py in its own process: canned answers
    over kept connections, one fixed round trip per service, so the batch time is the consumer's own."""
    stub = subprocess.Popen([sys.executable, str(ROOT / "bench" / "stub_aws.py"),
                             *(f"{service}={ms}" for service, ms in delays_ms.items())],
                            stdout=subprocess.PIPE, text=True)
    assert stub.stdout is not None
    endpoint = stub.stdout.readline().strip()
    saved = os.environ.get("AWS_ENDPOINT_URL")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        handler, _ = consumers.sendonce_handler("stub-table", f"{endpoint}/123456789012/dlq", 10)
        handler({"Records": [record(job("warm:0"))]}, Context())  # connections opened, as a warm instance has
        times = []
        for _ in range(batches):
            prefix = uuid.uuid4().hex[:8]
            started = time.perf_counter()
            handler({"Records": [record(job(f"{prefix}:{n}")) for n in range(10)]}, Context())
            times.append((time.perf_counter() - started) * 1000)
    finally:
        stub.terminate()
        stub.wait()
        if saved is not None:
            os.environ["AWS_ENDPOINT_URL"] = saved
    ordered = sorted(times)
    return {"p50_ms": statistics.median(ordered), "p90_ms": ordered[min(len(ordered) - 1,
                                                                         round(0.9 * (len(ordered) - 1)))],
            "min_ms": ordered[0], "max_ms": ordered[-1]}
