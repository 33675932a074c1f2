"""The demo's traffic: a workload's jobs through the deployed consumer with workers killed on purpose, orders
written through the outbox, some jobs re-enqueued midway; the recorder settles SES's events before it ends."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import IO, Any

import boto3

from ...emulator.server import LocalAws
from ...emulator.ses_publisher import SesEventPublisher
from ...lambda_service.sqs_source import EventSourceRunner, FaultPlan
from ...lambda_service.stack_runners import StackRunners
from ..example_app import Deployed
from ..options import DemoOptions
from ..steps import step
from ..workload import SENDER, Workload, enqueue


def run_phase(
    options: DemoOptions, aws: LocalAws, deployed: Deployed, workload: Workload, faults: FaultPlan,
    publisher: SesEventPublisher, recorder_runner: EventSourceRunner, log: IO[str], say: Callable[[str], None],
    with_orders: bool, label: str = step(5),
) -> EventSourceRunner:
    sqs = boto3.client("sqs")
    queue_url = deployed.consumer.source.queue_url
    enqueue(sqs, queue_url, workload.first_wave)
    say(f"{label} enqueued {len(workload.first_wave)} jobs: {workload.describe_first_wave()}; {faults.describe()}")
    # The consumer and the outbox relay, started as `sendonce-local run` starts a stack's runners.
    phase = StackRunners(aws.environment, log, faults=lambda: faults).start([deployed.consumer], deployed.relays)
    try:
        runner, relay_runners = phase.runner_of(deployed.consumer), phase.relays
        if with_orders and relay_runners and deployed.outbox_table:
            committed = write_orders_through_outbox(deployed.outbox_table, options.orders, options.seed, workload)
            say(f"      {options.orders} orders written with their receipt in one transaction (outbox); "
                f"each transaction retried once: {committed} retries committed, the outbox kept each receipt "
                "intent once (ON CONFLICT DO NOTHING)")
        _reenqueue_midway(runner, sqs, queue_url, workload.reenqueued, len(workload.first_wave), options.bound(), say)

        def progress(elapsed: float, depth: dict[str, int]) -> None:
            s = runner.stats
            say(f"      {elapsed:6.1f}s  delivered {s.records_delivered:4d}  deleted {s.records_deleted:4d}  "
                f"queue {depth['visible']:3d} waiting / {depth['in_flight']:3d} in flight  "
                f"faults {s.faults_armed} (killed {s.workers_killed})  timeouts {s.timeouts}  "
                f"SES events {publisher.stats.events_published}")

        drained = runner.run_until_drained(options.bound(), progress,
                                           upstream_idle=lambda: all(r.idle() for r in relay_runners))
    finally:
        phase.stop()
    settled = recorder_runner.run_until_drained(options.bound(), upstream_idle=lambda: publisher.pending() == 0)
    if not (drained and settled):
        say(f"      the queues did not drain within the time left ({options.budget_s:g} s for all phases, at most "
            f"{options.bound_s:g} s for one); reporting what happened so far")
    return runner


def write_orders_through_outbox(outbox_table: str, orders: int, seed: int, workload: Workload) -> int:
    """Each order and its receipt in one DynamoDB transaction, then the same transaction again, as a client
    retrying after a timeout would. Returns how many retries committed: a duplicate intent never cancels the
    business write (a cancelled one raises here), and the outbox keeps the first."""
    from sendonce_producer import EmailJob, dedupe_key, outbox_put

    dynamodb: Any = boto3.client("dynamodb")
    orders_table = f"demo-orders-{seed}"
    dynamodb.create_table(TableName=orders_table, KeySchema=[{"AttributeName": "orderId", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "orderId", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    committed = 0
    for n in range(orders):
        order_id, recipient = f"order-{20_000 + n}", f"buyer{n}@example.org"
        key = dedupe_key(order_id, "confirmed", recipient=recipient)
        subject = f"Order {order_id} confirmed"
        job = EmailJob(dedupe_key=key, sender=SENDER, to=[recipient], subject=subject, text="We got your order.")
        transaction = [
            {"Put": {"TableName": orders_table, "Item": {"orderId": {"S": order_id}, "total": {"N": str(10 + n)}}}},
            outbox_put(outbox_table, job),
        ]
        workload.add_outbox_order(key, subject)
        dynamodb.transact_write_items(TransactItems=transaction)
        dynamodb.transact_write_items(TransactItems=transaction)
        committed += 1
    return committed


def _reenqueue_midway(
    runner: EventSourceRunner, sqs: object, queue_url: str, bodies: list[str], first_wave: int, bound_s: float,
    say: Callable[[str], None],
) -> None:
    """An upstream service re-enqueues some jobs while the first copies are being handled."""
    deadline = time.monotonic() + bound_s
    while runner.stats.records_delivered < first_wave // 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # polled with a bound: the runner's own threads move the count
    enqueue(sqs, queue_url, bodies)
    jobs = "1 job" if len(bodies) == 1 else f"{len(bodies)} jobs"
    say(f"      re-enqueued {jobs} with new message ids (an upstream retry)")
