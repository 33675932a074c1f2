"""9f. A paused account: what each parked job costs, in SQS, SES and DynamoDB requests, against the same pause
handled as a throttle (what the consumer did before it learned SES's stops: each job asked SES again on a doubling
delay). Its own in-process emulator, whose SES is paused with SES's own call; the consumer as deployed, played as
Lambda's event source by this module (receive a batch, handle it, delete what it acknowledged)."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3

STOP_JOBS = 40
CYCLES = 4  # a parked job's copies an hour: SQS's longest delay is 15 minutes
CYCLE_MS = 15 * 60_000


@dataclass(frozen=True)
class StopCosts:
    design: str  # "parked" or "throttled"
    batch_size: int
    jobs: int
    cycles: int  # deliveries of every job
    sqs: Counter[str]  # the job queue's requests by operation, over every cycle
    ses: int  # SendEmail requests
    dynamodb: int
    dead_letters: int

    def per_job_per_cycle(self, count: float) -> float:
        return count / self.jobs / self.cycles


def ses_stop_costs(jobs: int = STOP_JOBS, batch_sizes: tuple[int, ...] = (1, 5, 10)) -> list[StopCosts]:
    """Each design at each batch size: ``jobs`` jobs delivered ``CYCLES`` times while SES's account is paused, a
    cycle 15 minutes on the consumer's clock (the parked copies' delay; the throttled design's copies come back as
    its doubling delay says, which the report turns into copies an hour)."""
    return [_run(design, batch, jobs) for design in ("parked", "throttled") for batch in batch_sizes]


def _run(design: str, batch_size: int, jobs: int) -> StopCosts:
    from sendonce_contract.deploy_config import TimeBudget
    from sendonce_local.emulator.request_counts import REQUESTS, queue_name
    from sendonce_local.emulator.server import local_aws
    from sendonce_runtime.aws_clients import ledger_config, ses_config
    from sendonce_runtime.handler import Consumer
    from sendonce_runtime.outcome_log import OutcomeLog
    from sendonce_runtime.settings import Settings
    from sendonce_testing.lambda_events import SENDER_DOMAIN, FakeClock, FakeContext, job

    with local_aws(pointed=True):
        sqs, dynamodb, ses = boto3.client("sqs"), boto3.client("dynamodb"), boto3.client("sesv2")
        dynamodb.create_table(TableName="stops", KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        dlq = sqs.create_queue(QueueName="stops-dlq")["QueueUrl"]
        queue = sqs.create_queue(QueueName="stops-jobs", Attributes={"VisibilityTimeout": "180"})["QueueUrl"]
        ses.create_email_identity(EmailIdentity=SENDER_DOMAIN)
        ses.put_account_sending_attributes(SendingEnabled=False)
        settings = Settings(table_name="stops", dead_letter_queue_url=dlq, queue_url=queue, max_receive_count=5,
                            sender_identity=SENDER_DOMAIN, time_budget=TimeBudget.for_function_timeout(3))
        clock, log = FakeClock(), io.StringIO()
        consumer = Consumer.from_clients(settings, boto3.client("dynamodb", config=ledger_config(settings)),
                                         boto3.client("sesv2", config=ses_config(settings)),
                                         boto3.client("sqs", config=ledger_config(settings)), clock,
                                         OutcomeLog(log))
        # Copies at once, so a cycle is one generation of them; a 3 s function's context, so each copy holds its
        # original as a 15-minute delay would (6 x 3 s of visibility is shorter than the delay).
        consumer.redelivery.postponement_s = lambda outcome, postponements: 0
        if design == "throttled":
            _as_before(consumer)
        for n in range(jobs):
            sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(job(f"receipt:s{n}:u1")))
        before, queues_before = REQUESTS.snapshot(), REQUESTS.queue_snapshot()
        try:
            for _ in range(CYCLES):
                clock.advance(CYCLE_MS)
                _deliver_generation(sqs, queue, consumer, log, clock, jobs, batch_size, FakeContext)
        finally:
            # The emulator's state outlives this section in the process: the sections after it must find SES
            # sending (one that kept the state found every job parked, and waited for ever).
            ses.put_account_sending_attributes(SendingEnabled=True)
        counts, by_queue = REQUESTS.snapshot() - before, REQUESTS.queue_snapshot() - queues_before
        name = queue_name(queue)
        sqs_counts = Counter({operation: n for (q, operation), n in by_queue.items() if q == name})
        dead = int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"]["ApproximateNumberOfMessages"])
        return StopCosts(design, batch_size, jobs, CYCLES, sqs_counts,
                         ses=counts["sesv2", "SendEmail"],
                         dynamodb=sum(n for (service, _), n in counts.items() if service == "dynamodb"),
                         dead_letters=dead)


def _as_before(consumer: Any) -> None:
    """The consumer before it learned SES's stops: no stop check, and a pause refused like a throttle."""
    from sendonce_runtime.checks import chain

    processor = consumer.processor
    processor.checks = tuple(check for check in processor.checks if type(check).__name__ != "SesStops")
    processor._run_checks = chain(processor.checks, processor._claim_and_send)
    processor._stops = None
    send = processor._sender.send

    def throttled(job: Any) -> Any:
        outcome = send(job)
        if getattr(outcome, "stop", None) is not None:
            outcome.stop = None
        return outcome

    processor._sender.send = throttled


def _deliver_generation(sqs: Any, queue: str, consumer: Any, log: io.StringIO, clock: Any, jobs: int,
                        batch_size: int, context: Any) -> None:
    """Every job once, in batches as Lambda's event source receives them (older messages first: one generation).
    Counted by the consumer's log lines, one a record: while the account's sending is stopped, an invocation handed
    fewer than ten takes the rest from the queue itself."""
    from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record

    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    source = EventSourceSpec(queue, arn)
    handled, empty_receives = 0, 0
    while handled < jobs:
        if empty_receives > 30:  # a second's long poll each: the generation is gone, not late
            raise RuntimeError(f"only {handled} of {jobs} jobs came back in this delivery")
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=min(batch_size, jobs - handled),
                                       WaitTimeSeconds=1, VisibilityTimeout=180, MessageSystemAttributeNames=["All"],
                                       MessageAttributeNames=["All"]).get("Messages", [])
        records = [lambda_record(m, source, "us-east-1") for m in messages]
        if not records:
            empty_receives += 1
            continue
        logged = log.getvalue().count("\n")
        response = consumer.handle({"Records": records}, context(clock, budget_ms=3_000))
        failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
        done = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(records)
                if r["messageId"] not in failed]
        if done:
            sqs.delete_message_batch(QueueUrl=queue, Entries=done)
        handled += log.getvalue().count("\n") - logged
