"""9f. SES's stops: what each parked job costs, in SQS, SES and DynamoDB requests, for a stop of an hour and of a day:
in the waiting room (the default), as delayed copies (``waiting_room=False``; what every consumer did before the
room), and handled as a throttle (before the consumer learned SES's stops: each job asked SES again on a doubling
delay). Its own in-process emulator, whose SES is paused with SES's own call; the consumer as deployed, played as
Lambda's event source by this module (receive a batch, handle it, delete what it acknowledged); the schedule watch
run each minute of the consumer's clock, as its EventBridge rule runs it. Counted by the emulator: SQS's requests
on the job queue, every DynamoDB and SESv2 request."""

from __future__ import annotations

import io
import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

import boto3

STOP_JOBS = 40
CYCLES = 4  # a parked copy's deliveries an hour: SQS's longest delay is 15 minutes
CYCLE_MS = 15 * 60_000
WATCHED_MINUTES = 60  # the room's stop: the watch's runs measured, one a minute for an hour
ROOM, COPIES, THROTTLED = "room", "copies", "throttled"
DESIGNS = (ROOM, COPIES, THROTTLED)


# Lambda's own requests for every job, sent at once or parked: its receive and its delete of what was acknowledged.
LAMBDAS = frozenset({("sqs", "ReceiveMessage"), ("sqs", "DeleteMessageBatch")})


@dataclass(frozen=True)
class StopCosts:
    design: str  # one of DESIGNS
    batch_size: int
    jobs: int
    once: Counter[tuple[str, str]]  # by (service, operation): the room's parking and release, all jobs'
    per_delivery: Counter[tuple[str, str]]  # one delivery of every job (copies, throttled), averaged over CYCLES
    per_minute: Counter[tuple[str, str]]  # the stop's watch a minute (the room's), its base minute taken out
    base_minute: int  # the schedule watch's own minute, stops or not (the room's: every pipeline with one)
    dead_letters: int
    sent: int  # jobs sent once SES sent again

    def per_job(self, minutes: float, deliveries: float, own: bool = False) -> float:
        """One job's share of the requests of a stop of ``minutes``, its job delivered ``deliveries`` times; with
        ``own``, only what the room's parking and release cost it, beyond Lambda's receive and delete."""
        once = sum(n for call, n in self.once.items() if not own or call not in LAMBDAS)
        if own:
            return once / self.jobs
        return (once + sum(self.per_delivery.values()) * deliveries
                + sum(self.per_minute.values()) * minutes) / self.jobs

    def ses_per_job(self, minutes: float, deliveries: float) -> float:
        return sum(n * (1 if part is self.once else deliveries if part is self.per_delivery else minutes)
                   for part in (self.once, self.per_delivery, self.per_minute)
                   for (service, _), n in part.items() if service == "sesv2") / self.jobs


def ses_stop_costs(jobs: int = STOP_JOBS, batch_sizes: tuple[int, ...] = (1, 5, 10)) -> list[StopCosts]:
    """Each design at each batch size, ``jobs`` jobs parked while SES's account is paused."""
    return [_run(design, batch, jobs) for design in DESIGNS for batch in batch_sizes]


def _run(design: str, batch_size: int, jobs: int) -> StopCosts:
    from sendonce_contract.deploy_config import TimeBudget
    from sendonce_local.emulator.server import local_aws
    from sendonce_runtime.aws_clients import ledger_config, ses_config
    from sendonce_runtime.handler import Consumer
    from sendonce_runtime.outcome_log import OutcomeLog
    from sendonce_runtime.settings import Settings
    from sendonce_testing.lambda_events import SENDER_DOMAIN, FakeClock, FakeContext, job

    with local_aws(pointed=True) as aws:
        sqs, dynamodb, ses = boto3.client("sqs"), boto3.client("dynamodb"), boto3.client("sesv2")
        dynamodb.create_table(TableName="stops", KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        dlq = sqs.create_queue(QueueName="stops-dlq")["QueueUrl"]
        queue = sqs.create_queue(QueueName="stops-jobs", Attributes={"VisibilityTimeout": "180"})["QueueUrl"]
        ses.create_email_identity(EmailIdentity=SENDER_DOMAIN)
        ses.put_account_sending_attributes(SendingEnabled=False)
        room = _make_room(dynamodb) if design == ROOM else None
        settings = Settings(table_name="stops", dead_letter_queue_url=dlq, queue_url=queue, max_receive_count=5,
                            sender_identity=SENDER_DOMAIN, time_budget=TimeBudget.for_function_timeout(3),
                            waiting_room_table=room)
        clock, log = FakeClock(), io.StringIO()
        consumer = Consumer.from_clients(settings, boto3.client("dynamodb", config=ledger_config(settings)),
                                         boto3.client("sesv2", config=ses_config(settings)),
                                         boto3.client("sqs", config=ledger_config(settings)), clock,
                                         OutcomeLog(log))
        # Copies at once, so a cycle is one generation of them; a 3 s function's context, so each copy holds its
        # original as a 15-minute delay would (6 x 3 s of visibility is shorter than the delay).
        consumer.redelivery.postponement_s = lambda outcome, postponements: 0
        if design == THROTTLED:
            _as_before(consumer)
        for n in range(jobs):
            sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(job(f"receipt:s{n}:u1")))

        def deliver() -> None:
            _deliver_generation(sqs, queue, consumer, log, clock, jobs, batch_size, FakeContext)

        counted = _Counted(queue)
        once, per_delivery, per_minute = Counter[tuple[str, str]](), Counter[tuple[str, str]](), Counter()
        base_minute = 0
        try:
            if room is not None:
                watch = _watch(room, queue, settings, clock)
                watch.run()  # nothing waits: the watch's own minute, which every pipeline with a room pays
                base = counted.since()
                base_minute = sum(base.values())
                deliver()  # parked in the room
                once += counted.since()
                for _ in range(WATCHED_MINUTES):
                    clock.advance(60_000)
                    watch.run()
                per_minute = Counter({call: n / WATCHED_MINUTES - base[call]
                                      for call, n in counted.since().items() if n / WATCHED_MINUTES > base[call]})
                ses.put_account_sending_attributes(SendingEnabled=True)
                clock.advance(60_000)
                watch.run()  # the backlog sent back
                released = counted.since()
                once += Counter({call: n - base[call] - per_minute[call] for call, n in released.items()
                                 if n > base[call] + per_minute[call]})
            else:
                for _ in range(CYCLES):
                    clock.advance(CYCLE_MS)
                    deliver()
                per_delivery = Counter({call: n / CYCLES for call, n in counted.since().items()})
                ses.put_account_sending_attributes(SendingEnabled=True)
                clock.advance(CYCLE_MS)
            sent_before = len(aws.sent_emails())
            deliver()  # SES sends again: every job once
            sent = len(aws.sent_emails()) - sent_before
        finally:
            # The emulator's state outlives this section in the process: the sections after it must find SES
            # sending (one that kept the state found every job parked, and waited for ever).
            ses.put_account_sending_attributes(SendingEnabled=True)
        dead = int(sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"]["ApproximateNumberOfMessages"])
        return StopCosts(design, batch_size, jobs, once, per_delivery, per_minute, base_minute, dead, sent)


class _Counted:
    """The emulator's request counts by (service, operation) since the last call: SQS's on the job queue only (less
    the harness's GetQueueAttributes, which reads its ARN), every DynamoDB and SESv2 request."""

    def __init__(self, queue: str) -> None:
        from sendonce_local.emulator.request_counts import REQUESTS, queue_name

        self._requests, self._queue = REQUESTS, queue_name(queue)
        self._counts, self._queues = REQUESTS.snapshot(), REQUESTS.queue_snapshot()

    def since(self) -> Counter[tuple[str, str]]:
        counts, queues = self._requests.snapshot(), self._requests.queue_snapshot()
        calls = Counter({call: n for call, n in (counts - self._counts).items() if call[0] in ("dynamodb", "sesv2")})
        for (queue, operation), n in (queues - self._queues).items():
            if queue == self._queue and operation != "GetQueueAttributes":
                calls["sqs", operation] += n
        self._counts, self._queues = counts, queues
        return calls


def _make_room(dynamodb: Any) -> str:
    from sendonce_contract.waiting_room import DUE
    from sendonce_contract.waiting_room import ROOM as ROOM_KEY

    dynamodb.create_table(
        TableName="stops-room", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": ROOM_KEY, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": ROOM_KEY, "AttributeType": "S"},
                              {"AttributeName": DUE, "AttributeType": "S"}])
    return "stops-room"


def _watch(room: str, queue: str, settings: Any, clock: Any) -> Any:
    from sendonce_contract.waiting_room import ScheduleWatchConfig
    from sendonce_runtime.schedule_watch import ScheduleWatch

    config = ScheduleWatchConfig(room, queue, ledger_table_name=settings.table_name,
                                 sender_identity=settings.sender_identity)
    return ScheduleWatch(config, boto3.client("dynamodb"), boto3.client("sqs"), clock, io.StringIO(),
                         ses=boto3.client("sesv2"))


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
