"""What an email's life after the send costs: its outcome events, and waiting for a ``sendAt``.

Both run the real code against the embedded emulator in this process (moto's server over HTTP), count the AWS
requests made, and price them on paper. ``make bench ARGS="--only outcome-events"`` or ``--only scheduled`` reruns
one section alone.
"""

from __future__ import annotations

import io
import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import boto3

from sendonce_testing.lambda_events import LambdaContext, job, sqs_record

COPY_DELAY_S = 900  # SQS's longest message delay: a waiting job is copied this often


class _Counting:
    """A boto3 client whose calls are counted by operation."""

    def __init__(self, client: Any, counts: Counter[str]) -> None:
        self._client, self._counts = client, counts

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method) or name.startswith("_") or name == "meta":
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counts[name] += 1
            return method(*args, **kwargs)

        return counted


@contextmanager
def _emulator() -> Iterator[Any]:
    """The embedded emulator, with this process's AWS environment pointing at it while the section runs. moto keeps
    one state per process, so each section names its resources apart from the other's."""
    from sendonce_local.emulator.server import local_aws

    with local_aws(fresh=False, pointed=True) as aws:
        yield aws


def _table(name: str, stream: bool) -> None:
    spec = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}} if stream else {}
    boto3.client("dynamodb").create_table(
        TableName=name, KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        **spec)


def _job(key: str, to: str, **extra: Any) -> str:
    return json.dumps(job(key, to=[to], subject="Receipt", text="Thanks", **extra))


def outcome_event_costs(emails: int) -> dict[str, Any]:
    """Ordinary first sends (90% delivered, 10% bounced) with SES's events recorded, then the table's stream read
    and handed to the outcome publisher in batches of 100, as its event source would."""
    from sendonce_local.emulator.ses_publisher import EventFaults, SesEventPublisher, as_sqs_records
    from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings
    from sendonce_runtime.handler import Consumer
    from sendonce_runtime.outcome_log import OutcomeLog
    from sendonce_runtime.outcome_publisher import OutcomePublisher, PublisherSettings
    from sendonce_runtime.settings import Settings

    with _emulator() as aws:
        _table("ledger", stream=True)
        sqs, ses = boto3.client("sqs"), boto3.client("sesv2")
        dlq = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        ses.create_email_identity(EmailIdentity="example.com")
        ses.create_configuration_set(ConfigurationSetName="bench")
        settings = Settings(table_name="ledger", dead_letter_queue_url=dlq, configuration_set="bench",
                            pipeline_tag="bench", evidence_grace_ms=60_000,
                            parallelism=10)
        consumer = Consumer.from_clients(settings, boto3.client("dynamodb"), ses, sqs, log=OutcomeLog(io.StringIO()))
        recorder = EventRecorder.from_clients(RecorderSettings("ledger", dlq, "bench"), boto3.client("dynamodb"),
                                              sqs, log=EventLog(io.StringIO()))

        def deliver(events: list[dict[str, Any]]) -> None:
            recorder.handle({"Records": as_sqs_records(events)})

        publisher_ses = SesEventPublisher(["bench"], deliver, aws.account_id, aws.region,
                                          EventFaults(delay_s=0, outcome_delay_s=0), 0)
        bodies = [_job(f"k:{n}", "bounce@simulator.amazonses.com" if n % 10 == 0 else f"user{n}@example.org")
                  for n in range(emails)]
        for start in range(0, emails, 10):
            consumer.handle({"Records": [sqs_record(b) for b in bodies[start:start + 10]]},
                            LambdaContext(remaining_ms=60_000))
        publisher_ses.pump(float("inf"))
        streams = boto3.client("dynamodbstreams")
        arn = boto3.client("dynamodb").describe_table(TableName="ledger")["Table"]["LatestStreamArn"]
        records: list[dict[str, Any]] = []
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                                  ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            while iterator:
                page = streams.get_records(ShardIterator=iterator, Limit=1000)
                records += page["Records"]
                iterator = page.get("NextShardIterator") if page["Records"] else None
        calls: Counter[str] = Counter()
        events = _Counting(boto3.client("events"), calls)
        publisher = OutcomePublisher(PublisherSettings("default", "bench"), events, log=io.StringIO())
        started, invocations = time.thread_time(), 0  # this thread: the emulator answers from its own threads
        transitions: Counter[str] = Counter()
        for start in range(0, len(records), 100):
            batch = [{**r, "dynamodb": {**r["dynamodb"]}} for r in records[start:start + 100]]
            for item in batch:
                for outcome in publisher.outcomes(item):
                    transitions[outcome.outcome.transition] += 1
            publisher.handle({"Records": batch})
            invocations += 1
        cpu_ms = (time.thread_time() - started) * 1000
    published = sum(transitions.values())
    return {"emails": emails, "stream_records": len(records), "events": published, "transitions": transitions,
            "put_events": calls["put_events"], "invocations": invocations, "cpu_ms": cpu_ms}


def scheduled_costs(hours: tuple[int, ...]) -> list[dict[str, Any]]:
    """For each wait, one job scheduled that many hours ahead, waiting as delayed copies (before the waiting room)
    and in the waiting room, in one run: handled on each delivery with the clock moved to when it would come back,
    until it is sent; every AWS request made for it counted (the consumer's, and the schedule watch's run that
    sends it back)."""
    from sendonce_contract.waiting_room import DUE, ROOM, ScheduleWatchConfig
    from sendonce_runtime.handler import Consumer
    from sendonce_runtime.outcome_log import OutcomeLog
    from sendonce_runtime.schedule_watch import ScheduleWatch
    from sendonce_runtime.settings import Settings

    class Clock:
        now = time.time_ns() // 1_000_000

        def now_ms(self) -> int:
            return Clock.now

    figures = []
    with _emulator() as aws:
        _table("scheduled-ledger", stream=False)
        boto3.client("dynamodb").create_table(
            TableName="scheduled-room", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": ROOM, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": ROOM, "AttributeType": "S"},
                                  {"AttributeName": DUE, "AttributeType": "S"}])
        sqs = boto3.client("sqs")
        jobs = sqs.create_queue(QueueName="scheduled-jobs")["QueueUrl"]  # the copies wait here, delayed
        dlq = sqs.create_queue(QueueName="scheduled-dlq")["QueueUrl"]
        identities = boto3.client("sesv2").list_email_identities()["EmailIdentities"]
        if not any(i["IdentityName"] == "example.com" for i in identities):
            boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
        for wait_hours in hours:
            for room in (False, True):
                calls: Counter[str] = Counter()
                settings = Settings(table_name="scheduled-ledger", dead_letter_queue_url=dlq, queue_url=jobs,
                                    max_receive_count=5, dedupe_ttl_s=(wait_hours + 24) * 3_600,
                                    waiting_room_table="scheduled-room" if room else None)
                clock = Clock()
                key = f"k:later:{wait_hours}:{room}"
                due = datetime.fromtimestamp((clock.now + wait_hours * 3_600_000) / 1000, UTC).isoformat()
                body = _job(key, "ada@example.org", sendAt=due)
                dynamodb = _Counting(boto3.client("dynamodb"), calls)
                consumer = Consumer.from_clients(settings, dynamodb, boto3.client("sesv2"), _Counting(sqs, calls),
                                                 clock, OutcomeLog(io.StringIO()))
                watch = ScheduleWatch(ScheduleWatchConfig("scheduled-room", jobs), dynamodb, _Counting(sqs, calls),
                                      clock, io.StringIO())
                sent_before, deliveries, due_ms = len(aws.sent_emails()), 0, clock.now + wait_hours * 3_600_000
                waiting: Counter[str] = Counter()  # the requests before the delivery that sends it
                while len(aws.sent_emails()) == sent_before and deliveries < 10_000:
                    waiting = Counter(calls)
                    deliveries += 1
                    consumer.handle({"Records": [sqs_record(body)]}, LambdaContext(remaining_ms=60_000))
                    if room:  # the watch's run a minute before it is due sends it back, delayed the rest
                        Clock.now = due_ms - 60_000
                        watch.run()
                        Clock.now = due_ms
                    else:  # SQS hands its copy back when the copy's delay ends
                        Clock.now = min(Clock.now + COPY_DELAY_S * 1000, due_ms)
                figures.append({"hours": wait_hours, "room": room, "deliveries": deliveries,
                                "sent": len(aws.sent_emails()) - sent_before, "requests": dict(waiting)})
    return figures


