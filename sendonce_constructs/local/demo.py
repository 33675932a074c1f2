"""The main job, locally: deploy the example app to the embedded emulator with the real CDK CLI, send it real
traffic through the deployed consumer with workers killed on purpose, and report what SES accepted."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3

from .cdk_cli import bootstrap_and_deploy
from .emulator import LocalAws, local_aws
from .event_source_runner import EventSourceRunner, FaultPlan
from .report import Report, build_report, render_text, write_outputs
from .stack_reader import physical_id_of, read_consumers, read_stream_functions
from .stream_runner import StreamEventSourceRunner
from .workload import SENDER, Workload, build_workload, enqueue

SENDER_IDENTITY = "example.com"


@dataclass(frozen=True)
class DemoOptions:
    project_dir: Path = Path()
    out_dir: Path = Path(".demo-out")
    stack: str = "SendOnceExample"
    keys: int = 250
    orders: int = 10  # orders written with their receipt in one transaction, through the outbox
    fault_probability: float = 0.1
    seed: int = 42
    # Short, so redeliveries come back within seconds (visibility is 6x this); the guarantees do not depend on it.
    function_timeout_s: int = 3
    bound_s: float = 900


@contextmanager
def _pointed_at(aws: LocalAws) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(aws.environment)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def apply_emulator_gaps(table_name: str) -> list[str]:
    """Do by API what the emulator's CloudFormation skips, and say so."""
    boto3.client("dynamodb").update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"AttributeName": "expiresAt", "Enabled": True}
    )
    return [
        "moto's CloudFormation ignores TimeToLiveSpecification: TTL on expiresAt was applied with the API "
        "(moto never deletes expired items; the consumer treats them as absent anyway)",
        "point-in-time recovery and the queues' TLS-only policies are in the template but not modelled by moto",
        "moto runs no Lambda code without Docker: the local runners invoke the deployed functions for their SQS "
        "and DynamoDB-stream event sources, and moto's own Docker-bound delivery is switched off",
    ]


def run_demo(options: DemoOptions, say: Callable[[str], None] = print) -> Report:
    out = options.out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    cdk_log, consumer_log_path = out / "cdk.log", out / "consumer.log"
    cdk_log.write_text("")
    cdk_out = out / "cdk.out"
    started = time.monotonic()
    with local_aws() as aws, _pointed_at(aws):
        say(f"[1/6] embedded AWS emulator (moto) on {aws.endpoint}, account {aws.account_id}, {aws.region}")
        say(f"[2/6] cdk bootstrap + cdk deploy {options.stack} (examples/app.py) to it; log in {cdk_log}")
        bootstrap_and_deploy(
            options.stack, options.project_dir.resolve(), cdk_out, {**os.environ}, aws.account_id, aws.region,
            {"functionTimeoutSeconds": str(options.function_timeout_s)}, cdk_log,
        )
        table = physical_id_of(options.stack, "AWS::DynamoDB::Table", "ReceiptsDedupeTable")
        notes = apply_emulator_gaps(table)
        for note in notes:
            say(f"      emulator gap: {note}")
        [consumer] = read_consumers(options.stack, cdk_out)
        boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER_IDENTITY)
        say(f"[3/6] deployed {consumer.function.name}: handler {consumer.function.handler}, timeout "
            f"{consumer.function.timeout_s:g} s, batch {consumer.source.batch_size}, "
            f"{consumer.source.max_concurrency} concurrent; SES identity {SENDER_IDENTITY} verified")
        workload = build_workload(options.keys, options.seed)
        sqs = boto3.client("sqs")
        enqueue(sqs, consumer.source.queue_url, workload.first_wave)
        say(f"[4/6] enqueued {len(workload.first_wave)} jobs: " + ", ".join(f"{v} {k}" for k, v in
                                                                            workload.kinds.items()))
        faults = FaultPlan(options.fault_probability, options.seed)
        say(f"[5/6] local event-source runner: {consumer.source.max_concurrency} pollers, worker processes, "
            f"{options.fault_probability:.0%} of invocations killed before or after SES accepts")
        relays = read_stream_functions(options.stack, cdk_out)
        with consumer_log_path.open("w", encoding="utf-8") as consumer_log, EventSourceRunner(
            consumer.function, consumer.source, aws.environment, consumer_log, faults
        ) as runner:
            relay_runners = [StreamEventSourceRunner(r.function, r.source, aws.environment, consumer_log).start()
                             for r in relays]
            if relays:
                outbox_table = physical_id_of(options.stack, "AWS::DynamoDB::Table", "ReceiptsOutboxTable")
                committed = write_orders_through_outbox(outbox_table, options.orders, options.seed, workload)
                say(f"      {options.orders} orders written with their receipt in one transaction (outbox); "
                    f"each transaction retried once: {committed} retries committed, the outbox kept each receipt "
                    "intent once (ON CONFLICT DO NOTHING)")
            _reenqueue_midway(runner, sqs, consumer.source.queue_url, workload.reenqueued, len(workload.first_wave),
                              options.bound_s, say)

            def progress(elapsed: float, depth: dict[str, int]) -> None:
                s = runner.stats
                say(f"      {elapsed:6.1f}s  delivered {s.records_delivered:4d}  deleted {s.records_deleted:4d}  "
                    f"queue {depth['visible']:3d} waiting / {depth['in_flight']:3d} in flight  "
                    f"killed {s.workers_killed}  timeouts {s.timeouts}")

            drained = runner.run_until_drained(options.bound_s, progress,
                                               upstream_idle=lambda: all(r.idle() for r in relay_runners))
            for relay_runner in relay_runners:
                relay_runner.stop()
        if not drained:
            say(f"      the queue did not drain within {options.bound_s:g} s; reporting what happened so far")
        env = consumer.function.environment
        report = build_report(
            aws.sent_emails(), workload, env.get("SENDONCE_DELIVERY", "at-most-once"), table,
            env["SENDONCE_DLQ_URL"], runner.stats.as_dict(), notes,
        )
        paths = write_outputs(report, out)
        say(f"[6/6] done in {time.monotonic() - started:.0f} s; report: {', '.join(str(p) for p in paths)}; "
            f"consumer log: {consumer_log_path}")
        say(render_text(report))
    return report


def write_orders_through_outbox(outbox_table: str, orders: int, seed: int, workload: Workload) -> int:
    """Each order and its receipt in one DynamoDB transaction, then the same transaction again, as a client
    retrying after a timeout would. Returns how many retries committed: a duplicate intent never cancels the
    business write (a cancelled one raises here), and the outbox keeps the first."""
    from sendonce_producer import EmailJob, dedupe_key, outbox_put

    dynamodb = boto3.client("dynamodb")
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
    say(f"      re-enqueued {len(bodies)} jobs with new message ids (an upstream retry)")
