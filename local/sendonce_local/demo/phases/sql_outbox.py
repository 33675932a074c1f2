"""The demo's SQL outbox phase: orders in a real PostgreSQL, each order and its receipt committed in one
transaction, relayed to the deployed job queue by ``sendonce-outbox-relay``, counted in the emulator's SES."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any

from ...databases.postgres import create_database, embedded_postgresql
from ...lambda_service.deployed_stack import DeployedConsumer
from ...lambda_service.stack_runners import StackRunners
from ..phase import PhaseContext, PhaseReport

SUBJECT_PREFIX = "Receipt sql-order-"  # the phase's emails, told apart from the rest of the demo's by subject
RELAY_BATCH = 5
BOUND_S = 180


@dataclass
class SqlOutboxReport(PhaseReport):
    """What the phase did and what the emulator's SES accepted for it."""

    orders: int
    committed: int
    rolled_back: int
    applied_twice: int
    relay_killed_after_batches: int
    relay_stopped_cleanly: bool
    consumers_killed: int
    emails_per_committed_key: dict[int, int]  # emails -> keys
    rolled_back_emailed: int
    drain_s: float

    @property
    def ok(self) -> bool:
        return (self.emails_per_committed_key == {1: self.committed} and self.rolled_back_emailed == 0
                and self.relay_stopped_cleanly)

    def lines(self) -> list[str]:
        return [
            f"  {self.orders} orders in PostgreSQL, each with its receipt in one transaction: {self.committed} "
            f"committed, {self.rolled_back} rolled back, {self.applied_twice} order events applied twice",
            f"    the relay SIGKILLed after {self.relay_killed_after_batches} batches and restarted "
            f"(SIGTERM then: {'exit 0' if self.relay_stopped_cleanly else 'NOT a clean exit'}); "
            f"{self.consumers_killed} consumer invocations killed before or after SES accepted a send",
            f"    emails per committed order (from SES): {self.emails_per_committed_key}; rolled-back orders "
            f"emailed: {self.rolled_back_emailed}; drained in {self.drain_s:.1f} s -> "
            f"{'PASS' if self.ok else 'FAIL'}",
        ]

    def failure(self) -> str:
        return "SQL outbox: " + self.lines()[-1].strip()


def is_phase_email(sent: Any) -> bool:
    return str(getattr(sent, "subject", "")).startswith(SUBJECT_PREFIX)


def _orders(connection: Any, count: int, seed: int) -> tuple[set[str], set[str], int]:
    """Each order and its receipt in one transaction; some rolled back, some applied twice."""
    import random

    from sendonce_producer import EmailJob
    from sendonce_producer.sql_outbox import add

    chance = random.Random(seed)
    committed: set[str] = set()
    rolled_back: set[str] = set()
    twice = 0
    for n in range(count):
        key = f"sql-order-{seed}-{n}:receipt"
        job = EmailJob(dedupe_key=key, sender="Shop <receipts@example.com>", to=[f"customer{n}@example.org"],
                       subject=f"Receipt {key}", text="Thanks for your order.")
        commits = chance.random() >= 0.2
        rounds = 2 if commits and chance.random() < 0.3 else 1  # the same order event applied twice
        for _ in range(rounds):
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO orders (id, customer) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                               (f"order-{n}", f"customer{n}@example.org"))
                add(cursor, job)
            if commits:
                connection.commit()
            else:
                connection.rollback()
        twice += rounds == 2
        (committed if commits else rolled_back).add(key)
    return committed, rolled_back, twice


def _relay(dsn: str, queue_url: str, environment: dict[str, str]) -> subprocess.Popen[str]:
    import sys

    return subprocess.Popen([sys.executable, "-m", "sendonce_producer.relay_cli", "--dsn", dsn, "--queue-url",
                             queue_url, "--batch-size", str(RELAY_BATCH), "--poll-interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **environment})


def sql_outbox_phase(context: PhaseContext) -> SqlOutboxReport:
    options, aws = context.options, context.aws
    context.say("      the SQL outbox: orders and receipts committed in PostgreSQL, relayed by sendonce-outbox-relay")
    report = run_sql_outbox_phase(context.deployed.consumer, aws.environment, context.log, options.orders,
                                  options.seed, aws.sent_emails, context.say, options.phase_fault_probability)
    for line in report.lines():
        context.say(line)
    return report


def run_sql_outbox_phase(consumer: DeployedConsumer, environment: dict[str, str], log: IO[str], orders: int,
                         seed: int, sent_emails: Callable[[], Iterable[Any]],
                         say: Callable[[str], None], fault_probability: float) -> SqlOutboxReport:
    """Orders committed with their receipts in a real PostgreSQL, relayed by ``sendonce-outbox-relay`` (SIGKILLed
    after two batches, restarted, stopped with SIGTERM), sent by the deployed consumer with some invocations
    killed mid-send; counted from the emulator's SES."""
    import json
    from collections import Counter

    import psycopg

    from sendonce_producer.sql_outbox import schema

    from ...lambda_service.sqs_source import FaultPlan

    count = max(orders * 2, 12)
    with embedded_postgresql() as server:
        dsn = create_database(server, "shop")
        with psycopg.connect(dsn) as connection:
            connection.execute(schema("postgresql"))
            connection.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, customer TEXT NOT NULL)")
            connection.commit()
            committed, rolled_back, twice = _orders(connection, count, seed)
        say(f"      {count} orders in a real PostgreSQL ({server.dsn.split('@')[1].split('/')[0]}), each with its "
            f"receipt in one transaction: {len(committed)} committed, {len(rolled_back)} rolled back, {twice} "
            "applied twice (the outbox kept one row: ON CONFLICT DO NOTHING)")
        started = time.monotonic()
        faults = FaultPlan(fault_probability, seed, ("before_send", "after_send"), forced=2)
        runners = StackRunners(environment, log, faults=lambda: faults).start([consumer], [])
        try:
            runner = runners.runner_of(consumer)
            killed = _relay(dsn, consumer.source.queue_url, environment)
            assert killed.stdout is not None
            batches = 0
            while batches < 2:
                line = killed.stdout.readline()
                if not line:
                    break
                batches += json.loads(line).get("event") == "batch"
            killed.kill()  # SIGKILL, mid-relay: its open batch rolls back and is claimed again
            killed.communicate(timeout=30)
            relay = _relay(dsn, consumer.source.queue_url, environment)
            bound = time.monotonic() + BOUND_S
            quiet = 0
            while time.monotonic() < bound and quiet < 3:  # every committed key sent and the queue empty, thrice
                sent = Counter(str(m.subject).removeprefix("Receipt ") for m in sent_emails() if is_phase_email(m))
                empty = not any(runner.queue_depth().values())
                quiet = quiet + 1 if empty and committed <= set(sent) else 0
                time.sleep(0.5)
            relay.send_signal(signal.SIGTERM)
            try:
                relay.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.communicate()
            consumers_killed = runner.stats.as_dict().get("workers_killed", 0)
        finally:
            runners.stop()
        sent = Counter(str(m.subject).removeprefix("Receipt ") for m in sent_emails() if is_phase_email(m))
    per_key = Counter(sent[key] for key in committed)
    return SqlOutboxReport(
        orders=count, committed=len(committed), rolled_back=len(rolled_back), applied_twice=twice,
        relay_killed_after_batches=batches, relay_stopped_cleanly=relay.returncode == 0,
        consumers_killed=int(consumers_killed), emails_per_committed_key=dict(sorted(per_key.items())),
        rolled_back_emailed=sum(1 for key in rolled_back if sent[key]), drain_s=time.monotonic() - started)
