"""16. The mis-keyed-producer guard: what ``suspected_doubles`` and ``recipient_cap`` add to the consumer per email.

The consumer is the bundled one (bench/consumers.py), in this process, against the emulator in its own process, so
the CPU time measured here is the consumer's alone. Three kinds of first sends, each its own key, in batches of ten
at parallelism 1, the kinds in turn (each run starting with the next) so drift hits them alike: the guard off, the
guard on with every email new to it (distinct content), and the guard on with every email a suspected double of the
one before it (the same receipt to the same recipient under a new key: a mis-keyed producer, flagged and sent).
Every DynamoDB request is counted on the consumer's own client (botocore's ``before-call``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import consumers
from emulator_process import create_resources, emulator_in_own_process
from plan import Spread

from scenarios.attachments import PATIENT_READ_S, handle_in_batches
from sendonce_contract.mis_keyed import OnSuspectedDouble
from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record

KINDS = ("off", "new", "suspect")
RECIPIENT_CAP = 1_000  # high enough that no email of a run reaches it: its write is measured, not its hold


def guard_costs(emails: int, repeats: int) -> dict[str, Any]:
    """``repeats`` runs of ``emails`` first sends per kind. Per email: the consumer's CPU and wall time, with ratios to
    the guard off from the same run, and its DynamoDB calls."""
    with emulator_in_own_process():
        names = create_resources()
        plain, plain_clients = consumers.sendonce_handler(names["ours"], names["dlq"], read_timeout_s=PATIENT_READ_S)
        guarded, guarded_clients = consumers.sendonce_handler(
            names["ours"], names["dlq"], read_timeout_s=PATIENT_READ_S, suspected_doubles=OnSuspectedDouble.FLAG,
            recipient_cap=RECIPIENT_CAP, guard_window_s=3_600)
        handlers = {"off": (plain, plain_clients), "new": (guarded, guarded_clients),
                    "suspect": (guarded, guarded_clients)}
        calls: Counter[str] = Counter()
        for client in (plain_clients["dynamodb"], guarded_clients["dynamodb"]):
            client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
        for handler, _ in (handlers["off"], handlers["new"]):  # connections opened
            handler({"Records": [record(job(f"warm:{uuid.uuid4().hex}"))]}, Context())
        cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
        wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
        counted: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        for run in range(repeats):
            prefix = uuid.uuid4().hex[:8]
            bodies = {kind: [job(f"{prefix}:{kind}:{n}", to=[f"{prefix}-{n}@example.org"], text=f"Order {n}")
                             for n in range(emails)] for kind in ("off", "new")}
            # The first of them sends; each one after it is the same receipt to the same recipient under a new key.
            bodies["suspect"] = [job(f"{prefix}:suspect:{n}", to=[f"{prefix}@example.org"], subject="Your receipt",
                                     text="Order") for n in range(emails + 1)]
            handlers["suspect"][0]({"Records": [record(bodies["suspect"].pop(0))]}, Context())
            for kind in KINDS[run % len(KINDS):] + KINDS[:run % len(KINDS)]:
                calls.clear()
                took_cpu, took_wall = handle_in_batches(handlers[kind][0], bodies[kind])
                cpu[kind].append(took_cpu / emails)
                wall[kind].append(took_wall / emails)
                counted[kind].update(calls)
    sent = emails * repeats
    return {
        "emails": emails, "repeats": repeats,
        "cpu_ms": {kind: Spread(values) for kind, values in cpu.items()},
        "wall_ms": {kind: Spread(values) for kind, values in wall.items()},
        "cpu_ratio": {kind: Spread([a / b for a, b in zip(cpu[kind], cpu["off"], strict=True)]) for kind in KINDS},
        "calls": {kind: {op: n / sent for op, n in counts.items()} for kind, counts in counted.items()},
    }
