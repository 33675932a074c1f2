"""Outcome events: each transition of a key, read from the ledger's stream, published once to EventBridge and
routed by the rule on_outcome makes to the application's target."""

from __future__ import annotations

import io
import json
from collections import Counter

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from consumer_harness import PIPELINE_TAG, FakeClock, FakeContext, event, job, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_constructs import SendOnceEmailQueue
from sendonce_constructs.errors import SendOnceConfigurationError
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.outcome_events import SOURCE
from sendonce_producer import cancel
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.outcome_publisher import OutcomePublisher, PublisherSettings

SIMULATOR = "simulator.amazonses.com"


class Stream:
    """The dedupe table's stream, read as Lambda's event source would hand it to the publisher."""

    def __init__(self, table: str) -> None:
        client = boto3.client("dynamodb")
        client.update_table(TableName=table, StreamSpecification={"StreamEnabled": True,
                                                                  "StreamViewType": "NEW_AND_OLD_IMAGES"})
        self.arn = client.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        self.streams = boto3.client("dynamodbstreams")
        self.after: dict[str, str] = {}

    def records(self) -> list[dict]:
        found = []
        for shard in self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            position = ({"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": self.after[shard_id]}
                        if shard_id in self.after else {"ShardIteratorType": "TRIM_HORIZON"})
            iterator = self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=shard_id, **position)
            batch = self.streams.get_records(ShardIterator=iterator["ShardIterator"])["Records"]
            if batch:
                self.after[shard_id] = batch[-1]["dynamodb"]["SequenceNumber"]
            found += batch
        return found


@pytest.fixture
def subscribed(pipeline):
    """A rule on the default bus for this pipeline's outcome events, with a queue as its target: the app."""
    queue_url = boto3.client("sqs").create_queue(QueueName="app-outcomes")["QueueUrl"]
    queue_arn = boto3.client("sqs").get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    bus = boto3.client("events")
    bus.put_rule(Name="app-outcomes", EventPattern=json.dumps({"source": [SOURCE],
                                                                "detail": {"pipeline": [PIPELINE_TAG]}}))
    bus.put_targets(Rule="app-outcomes", Targets=[{"Id": "app", "Arn": queue_arn}])
    stream = Stream(pipeline.table_name)
    publisher = OutcomePublisher(PublisherSettings("default", PIPELINE_TAG, "Test/Receipts"), bus,
                                 log=io.StringIO())

    def heard() -> list[dict]:
        publisher.handle({"Records": stream.records()})
        messages = []
        while batch := boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                                           VisibilityTimeout=600).get("Messages", []):
            messages += [json.loads(m["Body"]) for m in batch]
        return messages

    return heard


def per_key(heard: list[dict]) -> Counter:
    return Counter((e["detail"]["dedupeKey"], e["detail"]["transition"]) for e in heard)


@given(seed=st.integers(0, 2**16))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_each_transition_is_published_once_under_duplicated_and_reordered_ses_events(pipeline, subscribed, seed):
    from sendonce_local.emulator.ses_publisher import EventFaults

    clock = FakeClock()
    tag = f"{seed}"
    ses_events = pipeline.ses_events(clock, EventFaults(delay_s=0, outcome_delay_s=0, duplicate=0.5, reorder=True),
                                     seed)
    keys = {f"ok:{tag}": "ada@example.org", f"bounce:{tag}": f"bounce@{SIMULATOR}",
            f"complaint:{tag}": f"complaint@{SIMULATOR}"}
    records = [sqs_record(job(key, to=[to])) for key, to in keys.items()]
    pipeline.consumer(clock, **pipeline.evidence_settings()).handle(event(*records, *records), FakeContext(clock))
    ses_events.pump(float("inf"))
    heard = subscribed()
    assert per_key(heard) == Counter({
        (f"ok:{tag}", "sent"): 1, (f"ok:{tag}", "delivered"): 1,
        (f"bounce:{tag}", "sent"): 1, (f"bounce:{tag}", "bounced"): 1,
        (f"complaint:{tag}", "sent"): 1, (f"complaint:{tag}", "delivered"): 1,
        (f"complaint:{tag}", "complained"): 1,
    })
    bounce = next(e for e in heard if e["detail"]["transition"] == "bounced")
    assert bounce["source"] == SOURCE and bounce["detail-type"] == "Email Bounced"
    assert bounce["detail"]["bounceType"] == "Permanent" and bounce["detail"]["bounceSubType"] == "General"
    assert len(bounce["detail"]["eventId"]) == 64 and bounce["detail"]["sesMessageIds"]
    ses_events.pump(float("inf"))  # SES's events again, later: nothing new happened, nothing is published
    assert subscribed() == []


def test_cancelled_unknown_and_sent_twice_are_outcomes_too(pipeline, subscribed):
    from ses_event_fixtures import ses_event, sqs_records

    assert cancel(pipeline.table_name, "k:cancelled").cancelled
    clock = FakeClock()
    ledger = pipeline.consumer(clock).processor._ledger
    ledger.claim("k:unknown", "dead", clock.now_ms() - 1, "h")
    pipeline.consumer(clock, delivery=DeliveryPolicy.NEVER_RESEND).handle(event(sqs_record(job("k:unknown"))),
                                                                          FakeContext(clock))
    pipeline.consumer(clock).handle(event(sqs_record(job("k:twice"))), FakeContext(clock))
    pipeline.ses_events(clock)
    pipeline.recorder.handle(sqs_records(ses_event("Send", "k:twice", "ses-other")))
    assert per_key(subscribed()) == Counter({("k:cancelled", "cancelled"): 1, ("k:unknown", "unknown"): 1,
                                             ("k:twice", "sent"): 1, ("k:twice", "sent-twice"): 1})


def test_an_expired_job_and_a_suspected_double_reach_the_bus_once_each_through_the_stream(pipeline, subscribed):
    """Issue 58's outcomes as an app hears them: the consumer's writes, the table's stream, the publisher, the bus."""
    from datetime import UTC, datetime

    from sendonce_contract.message import CONTRACT_VERSION
    from sendonce_contract.mis_keyed import OnSuspectedDouble

    clock = FakeClock()
    consumer = pipeline.consumer(clock, pipeline_name="Test/Receipts", suspected_doubles=OnSuspectedDouble.FLAG,
                                 guard_window_s=600)
    stale = datetime.fromtimestamp((clock.now_ms() - 1_000) / 1000, UTC).isoformat()
    receipt = {"subject": "Your receipt for order 8891", "text": "Thanks for your order."}
    for body in (job("k:stale", expiresAt=stale, contractVersion=CONTRACT_VERSION), job("k:first", **receipt),
                 job("k:again", **receipt), job("k:again", **receipt)):  # the last: SQS delivering it twice
        consumer.handle(event(sqs_record(body)), FakeContext(clock))
    heard = per_key(subscribed())
    assert heard[("k:stale", "expired")] == 1 and heard[("k:again", "suspected-double")] == 1
    assert ("k:first", "suspected-double") not in heard and ("k:stale", "sent") not in heard


def test_every_emails_event_carries_tenant_null_when_its_job_named_none(pipeline, subscribed):
    clock = FakeClock()
    assert cancel(pipeline.table_name, "k:cancelled").cancelled
    consumer = pipeline.consumer(clock, outcome_bus="default", pipeline_tag=PIPELINE_TAG)
    refused = job("k:refused", **{"from": "x@unverified.example.net"})
    records = [sqs_record(job("k:plain")), sqs_record(job("k:acme", tenant="acme")), sqs_record(refused)]
    consumer.handle(event(*records), FakeContext(clock))
    tenants = {(e["detail"]["dedupeKey"], e["detail"]["transition"]): e["detail"].get("tenant", "no tenant field")
               for e in subscribed()}
    assert tenants == {("k:cancelled", "cancelled"): None, ("k:plain", "sent"): None, ("k:acme", "sent"): "acme",
                       ("k:refused", "dead-lettered"): None}


class FailingBus:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.entries: list[dict] = []

    def put_events(self, Entries: list[dict]) -> dict:
        if self.failures:
            self.failures -= 1
            return {"FailedEntryCount": len(Entries), "Entries": [{"ErrorCode": "InternalFailure"}] * len(Entries)}
        self.entries += Entries
        return {"FailedEntryCount": 0, "Entries": [{"EventId": str(i)} for i, _ in enumerate(Entries)]}


def stream_record(sequence: str, old: dict | None, new: dict) -> dict:
    return {"eventName": "MODIFY" if old else "INSERT",
            "dynamodb": {"SequenceNumber": sequence, "NewImage": new, **({"OldImage": old} if old else {})}}


SENT = {"dedupeKey": {"S": "k:1"}, "status": {"S": "SENT"}, "sentAt": {"N": "1"}, "sesMessageId": {"S": "a"}}


def test_a_failed_publish_is_retried_then_reported_from_the_first_failed_record_with_the_same_event_id():
    flaky = FailingBus(failures=2)
    publisher = OutcomePublisher(PublisherSettings("default", "tag", "P"), flaky, log=(log := io.StringIO()),
                                 sleep=lambda _: None)
    assert publisher.handle({"Records": [stream_record("7", None, SENT)]}) == {"batchItemFailures": []}
    [first] = flaky.entries
    down = FailingBus(failures=99)
    publisher = OutcomePublisher(PublisherSettings("default", "tag", "P"), down, log=log, sleep=lambda _: None)
    failed = publisher.handle({"Records": [stream_record("7", None, SENT), stream_record("8", None, SENT)]})
    assert failed == {"batchItemFailures": [{"itemIdentifier": "7"}]}
    assert json.loads(log.getvalue().splitlines()[-1])["OutcomeEventsFailed"] == 2
    again = FailingBus(failures=0)
    OutcomePublisher(PublisherSettings("default", "tag", "P"), again).handle(
        {"Records": [stream_record("7", None, SENT)]})
    assert json.loads(again.entries[0]["Detail"])["eventId"] == json.loads(first["Detail"])["eventId"]


def test_a_write_that_changes_nothing_publishes_nothing():
    bus = FailingBus(failures=0)
    OutcomePublisher(PublisherSettings("default", "tag", "P"), bus).handle(
        {"Records": [stream_record("9", SENT, SENT), {"eventName": "REMOVE", "dynamodb": {
            "SequenceNumber": "10", "OldImage": SENT}}]})
    assert bus.entries == []


def test_on_outcome_matches_this_pipelines_chosen_outcomes_only():
    stack = cdk.Stack(cdk.App(), "Test")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    inbox = sqs.Queue(stack, "Bounces")
    rule = pipeline.on_outcome("BouncesAndComplaints", targets.SqsQueue(inbox), outcomes=["bounced", "complained"])
    assert isinstance(rule, events.Rule)
    [pattern] = [r["Properties"]["EventPattern"] for name, r in
                 Template.from_stack(stack).find_resources("AWS::Events::Rule").items()
                 if name.startswith("ReceiptsBouncesAndComplaints")]
    assert pattern == {"source": ["sendonce"], "detail-type": ["Email Bounced", "Email Complaint Received"],
                       "detail": {"pipeline": [pipeline.node.addr]}}
    with pytest.raises(ValueError, match=r"'bouncd'.*choose from"):
        pipeline.on_outcome("Typo", outcomes=["bouncd"])


def test_outcome_events_need_a_stream_on_an_existing_table():
    stack = cdk.Stack(cdk.App(), "Test")
    table = dynamodb.Table.from_table_name(stack, "Mine", "mine")
    quiet = SendOnceEmailQueue(stack, "Defaulted", sender="example.com", existing_table=table)
    assert quiet.outcome_events is None  # left off, with a warning that says how to turn it on
    with pytest.raises(SendOnceConfigurationError, match="outcome_events=True needs a stream on existing_table"):
        SendOnceEmailQueue(stack, "Asked", sender="example.com", existing_table=table, outcome_events=True)
    with pytest.raises(SendOnceConfigurationError, match="outcome_bus was given with outcome_events=False"):
        SendOnceEmailQueue(stack, "Bus", sender="example.com", outcome_events=False,
                           outcome_bus=events.EventBus(stack, "AppBus"))


def test_a_keyed_job_moved_to_the_dlq_is_an_outcome_event_with_its_reason(pipeline, subscribed):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, outcome_bus="default", pipeline_tag=PIPELINE_TAG)
    refused = job("k:refused", **{"from": "x@unverified.example.net"})
    consumer.handle(event(sqs_record(refused), sqs_record("{not json")), FakeContext(clock))
    heard = subscribed()
    [dead] = [e for e in heard if e["detail"]["transition"] == "dead-lettered"]
    assert dead["detail-type"] == "Email Dead-Lettered" and dead["detail"]["dedupeKey"] == "k:refused"
    assert dead["detail"]["reasonCode"] == "ses-refused" and dead["detail"]["reason"]
    assert len(pipeline.dead_letters()) == 2  # the keyless one has no key to tell the app about


def test_dead_lettered_events_that_cannot_be_published_are_counted_and_never_fail_the_batch(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, outcome_bus="default", pipeline_tag=PIPELINE_TAG, pipeline_name="T/R")
    consumer.dead_letter_events._client = FailingBus(failures=99)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="T/R")
    refused = job("k:refused-2", **{"from": "x@unverified.example.net"})
    assert consumer.handle(event(sqs_record(refused)), FakeContext(clock)) == {"batchItemFailures": []}
    note = json.loads(log.getvalue().splitlines()[-1])
    assert note["outcome"] == "outcome_events_failed" and note["OutcomeEventsFailed"] == 1
