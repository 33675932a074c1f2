"""The urgent lane, deployed: a stack with ``urgent_lane=True`` synthesized into a cloud assembly, deployed by the
emulator's CloudFormation, and its two consumers run by the local Lambda service from that assembly, as
`sendonce-local run` runs them. Routing (the producer, the outbox relays, redrive), the rate split and its loan, one
ledger for both lanes, and a job on the wrong lane's queue; every count of emails from the emulator's SES."""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import pytest
from consumer_harness import SENDER_DOMAIN, job

from sendonce_constructs import SendOnceEmailQueue
from sendonce_constructs.runtime_asset import HANDLER
from sendonce_contract.companion_configs import RelayConfig
from sendonce_contract.deploy_config import ConsumerConfig
from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S
from sendonce_local.emulator.ses_publisher import SEND_LOG
from sendonce_local.lambda_service.stack_runners import DeployedStack, StackRunners, load_stack
from sendonce_ops.cli import main as sendonce
from sendonce_producer import EmailJob, Pipeline
from sendonce_producer.sql_connect import database
from sendonce_producer.sql_outbox import add, schema_statements
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings
from sendonce_runtime.lane_share import UrgentLaneWatch
from sendonce_runtime.outbox_relay import relay

STACK = "Lanes"
IDLE_STACK = "IdleLanes"  # the lending test's own pipeline
# Bulk keeps a quarter of 8 recipients a second (1/s on each of its two instances) and borrows the urgent lane's
# three quarters while the urgent lane is idle: 8/s in all, or 2/s without the loan.
SEND_RATE, MAX_CONCURRENCY, URGENT_SHARE = 8, 2, 0.75
FLOOD_STACK, FLOOD_RATE, FLOOD_INSTANCES = "FloodLanes", 5, 5
URGENT_GAP_S = 2.0  # urgent jobs in use, not idle: as often as section 9d's arrive
WATCH_AFTER_S = 1.0  # the watch reads the urgent lane's work item this long after each urgent job is enqueued


@dataclass
class Lanes:
    stack: DeployedStack
    queue: str
    urgent_queue: str
    dead_letter_queue: str
    urgent_dead_letter_queue: str
    environment: dict[str, str]
    table: str  # the dedupe table, which holds the urgent lane's work item
    pipeline_name: str

    def watch(self) -> UrgentLaneWatch:
        """A watch as a bulk instance has, on this pipeline's urgent lane's work item."""
        return UrgentLaneWatch(boto3.client("dynamodb"), self.table, self.pipeline_name,
                               lambda: round(time.time() * 1000))

    def pipeline(self) -> Pipeline:
        return Pipeline(queue_url=self.queue, table_name="-", urgent_queue_url=self.urgent_queue)

    def depth(self, queue: str) -> int:
        attributes = boto3.client("sqs").get_queue_attributes(
            QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
        return sum(int(value) for value in attributes["Attributes"].values())

    def bodies(self, queue: str) -> list[dict[str, Any]]:
        """Every job on ``queue``, received and put straight back."""
        sqs = boto3.client("sqs")
        found = []
        while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=30
                                           ).get("Messages", []):
            found += batch
        for message in found:
            sqs.change_message_visibility(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)
        return [json.loads(message["Body"]) for message in found]

    def purge(self) -> None:
        """Every queue emptied of what an earlier test left visible (SQS's PurgeQueue allows one a minute)."""
        sqs = boto3.client("sqs")
        for queue in (self.queue, self.urgent_queue, self.dead_letter_queue, self.urgent_dead_letter_queue):
            while batch := sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []):
                sqs.delete_message_batch(QueueUrl=queue, Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(batch)])

    def run(self, until: Any, bound_s: float = 60, every_s: float = 0.1) -> StackRunners:
        """Both lanes' consumers, run until ``until()`` holds (polled every ``every_s``, at most ``bound_s``)."""
        runners = StackRunners(self.environment, None).start(self.stack.consumers, [])
        try:
            deadline = time.monotonic() + bound_s
            while not until():
                assert time.monotonic() < deadline, "the lanes did not send in time"
                time.sleep(every_s)
        finally:
            runners.stop()
        return runners


def emails_per_key(since: int = 0) -> Counter[str]:
    return Counter(send.subject.removeprefix("Receipt ") for send in SEND_LOG.since(since))


def sent_at(since: int = 0) -> dict[str, float]:
    return {send.subject.removeprefix("Receipt "): send.accepted_at for send in SEND_LOG.since(since)}


def _deploy(stack_name: str, out: Path, environment: dict[str, str], **props: Any) -> Lanes:
    """A pipeline with ``urgent_lane`` synthesized to ``out`` and deployed to the emulator, as a user deploys it."""
    app = cdk.App(outdir=str(out))
    SendOnceEmailQueue(cdk.Stack(app, stack_name), "Mail", sender=SENDER_DOMAIN, urgent_lane=True, ses_events=False,
                       outcome_events=False, quota_watch=False, alarms=False, **props)
    app.synth()
    deployed = json.loads((out / f"{stack_name}.template.json").read_text())
    for resource in deployed["Resources"].values():  # the emulator has no asset bucket; the runners read cdk.out
        if resource["Type"] == "AWS::Lambda::Function":
            resource["Properties"]["Code"] = {"ZipFile": "def handler(event, context): pass"}
    deployed.pop("Rules", None)
    deployed.pop("Parameters", None)
    boto3.client("cloudformation").create_stack(StackName=stack_name, TemplateBody=json.dumps(deployed),
                                                Capabilities=["CAPABILITY_IAM"])
    boto3.client("sesv2").create_email_identity(EmailIdentity=SENDER_DOMAIN)
    stack = load_stack(stack_name, out)
    bulk = ConsumerConfig.from_env(stack.consumer(HANDLER).function.environment)
    urgent = ConsumerConfig.from_env(stack.consumer(HANDLER, lane="urgent").function.environment)
    assert bulk.queue_url and urgent.queue_url and bulk.table_name == urgent.table_name and bulk.pipeline_name
    return Lanes(stack, bulk.queue_url, urgent.queue_url, bulk.dead_letter_queue_url, urgent.dead_letter_queue_url,
                 environment, bulk.table_name, bulk.pipeline_name)


@pytest.fixture(scope="module")
def lanes(local_aws: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lanes]:
    local_aws.reset()
    yield _deploy(STACK, tmp_path_factory.mktemp("cdk.out"), local_aws.environment, send_rate=SEND_RATE,
                  max_concurrency=MAX_CONCURRENCY, urgent_share=URGENT_SHARE, outbox=True)
    local_aws.reset()


@pytest.fixture(scope="module")
def flood_lanes(lanes: Lanes, tmp_path_factory: pytest.TempPathFactory) -> Lanes:
    """Beside ``lanes`` (whose fixture resets the emulator once, before both): the shape of BENCHMARKS.md section
    9d, the default function timeout and urgent share, so each urgent instance paces at 0.5/s."""
    return _deploy(FLOOD_STACK, tmp_path_factory.mktemp("cdk.out"), lanes.environment, send_rate=FLOOD_RATE,
                   max_concurrency=FLOOD_INSTANCES)


def test_the_local_runner_plays_both_lanes_event_sources_from_the_deployed_stack(lanes):
    sources = {consumer.source.queue_url.rsplit("/", 1)[-1]: consumer.source.max_concurrency
               for consumer in lanes.stack.consumers}
    assert sources == {lanes.queue.rsplit("/", 1)[-1]: MAX_CONCURRENCY, lanes.urgent_queue.rsplit("/", 1)[-1]: 2}
    assert {c.function.environment.get("SENDONCE_LANE") for c in lanes.stack.consumers} == {"bulk", "urgent"}


def test_the_producer_routes_an_urgent_job_to_the_urgent_queue_and_a_bulk_one_to_the_job_queue(lanes):
    lanes.purge()
    pipeline = lanes.pipeline()
    pipeline.enqueue(EmailJob("reset:u1", f"a@{SENDER_DOMAIN}", ["ada@example.org"], subject="Reset", text="x",
                              priority="urgent"))
    failures = pipeline.enqueue_many([
        EmailJob(f"news:{n}", f"a@{SENDER_DOMAIN}", ["ada@example.org"], subject="News", text="x",
                 priority="urgent" if n == 1 else "bulk") for n in range(3)])
    assert failures == []
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.urgent_queue)) == ["news:1", "reset:u1"]
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.queue)) == ["news:0", "news:2"]
    assert all("priority" not in body for body in lanes.bodies(lanes.queue))  # bulk is the default: left out


def test_the_deployed_outbox_relay_routes_by_priority(lanes):
    lanes.purge()
    [outbox] = lanes.stack.stream_functions
    config = RelayConfig.from_env(outbox.function.environment)
    assert config.urgent_queue_url == lanes.urgent_queue
    bodies = [json.dumps(job(f"o:{n}", **({"priority": "urgent"} if n % 2 else {}))) for n in range(4)]
    records = [{"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(n), "NewImage": {
        "dedupeKey": {"S": f"o:{n}"}, "job": {"S": body}}}} for n, body in enumerate(bodies)]
    assert relay(records, boto3.client("sqs"), config.queue_url, config.fifo, config.urgent_queue_url) == []
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.urgent_queue)) == ["o:1", "o:3"]
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.queue)) == ["o:0", "o:2"]


def test_the_sql_outbox_relay_routes_by_priority(lanes, tmp_path: Path):
    lanes.purge()
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as connection:
        for statement in schema_statements("sqlite"):
            connection.execute(statement)
        for n in range(4):
            add(connection.cursor(), EmailJob(f"s:{n}", f"a@{SENDER_DOMAIN}", ["ada@example.org"], subject="S",
                                              text="x", priority="urgent" if n % 2 else "bulk"))
    settings = RelaySettings(lanes.queue, urgent_queue_url=lanes.urgent_queue)
    relayer = OutboxRelay(database(f"sqlite:///{path}"), settings, log=lambda line: None)
    try:
        assert relayer.drain().relayed == 4
    finally:
        relayer.close()
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.urgent_queue)) == ["s:1", "s:3"]
    assert sorted(body["dedupeKey"] for body in lanes.bodies(lanes.queue)) == ["s:0", "s:2"]


def test_a_redrive_of_the_urgent_dead_letter_queue_sends_each_job_back_to_its_own_lane(lanes, capsys):
    lanes.purge()
    sqs = boto3.client("sqs")
    sqs.send_message(QueueUrl=lanes.urgent_dead_letter_queue, MessageBody=json.dumps(job("d:u", priority="urgent")))
    sqs.send_message(QueueUrl=lanes.urgent_dead_letter_queue, MessageBody=json.dumps(job("d:b")))
    assert sendonce(["--stack", STACK, "--dedupe-ttl", str(DEFAULT_DEDUPE_TTL_S), "dlq", "--lane", "urgent",
                     "redrive"]) == 0
    assert "moved 2 messages" in capsys.readouterr().out
    assert [body["dedupeKey"] for body in lanes.bodies(lanes.urgent_queue)] == ["d:u"]
    assert [body["dedupeKey"] for body in lanes.bodies(lanes.queue)] == ["d:b"]
    assert lanes.depth(lanes.urgent_dead_letter_queue) == 0


def test_one_key_on_both_lanes_and_jobs_on_the_wrong_lane_are_each_sent_once_and_never_dead_lettered(lanes):
    lanes.purge()
    sqs, start = boto3.client("sqs"), len(SEND_LOG.since(0))
    both = json.dumps(job("k:both", priority="urgent"))
    sqs.send_message(QueueUrl=lanes.queue, MessageBody=both)  # one key, carried by both lanes
    sqs.send_message(QueueUrl=lanes.urgent_queue, MessageBody=both)
    sqs.send_message(QueueUrl=lanes.queue, MessageBody=json.dumps(job("k:urgent-on-bulk", priority="urgent")))
    sqs.send_message(QueueUrl=lanes.urgent_queue, MessageBody=json.dumps(job("k:bulk-on-urgent")))
    lanes.run(until=lambda: len(emails_per_key(start)) == 3
              and lanes.depth(lanes.queue) + lanes.depth(lanes.urgent_queue) == 0)
    assert emails_per_key(start) == {"k:both": 1, "k:urgent-on-bulk": 1, "k:bulk-on-urgent": 1}
    assert lanes.depth(lanes.dead_letter_queue) == lanes.depth(lanes.urgent_dead_letter_queue) == 0


@pytest.fixture
def idle_lanes(lanes: Lanes, tmp_path_factory: pytest.TempPathFactory) -> Lanes:
    """A pipeline of its own, shaped as ``lanes``: its urgent queue has never held a message, whatever the module's
    other tests left in theirs (in flight, or delayed copies)."""
    return _deploy(IDLE_STACK, tmp_path_factory.mktemp("cdk.out"), lanes.environment, send_rate=SEND_RATE,
                   max_concurrency=MAX_CONCURRENCY, urgent_share=URGENT_SHARE)


def test_bulk_borrows_the_urgent_share_while_the_urgent_lane_is_idle(idle_lanes):
    """24 bulk jobs alone: with the urgent lane's share lent, 8/s (a fresh instance lends from its watch's first
    read, which finds no work item: the urgent lane never took a record), about 3 s. The bound is not a clock
    race: at bulk's own 2/s, from its instances' full buckets (a token each), no run could send them in less than
    11 s, however fast the host."""
    lanes = idle_lanes
    assert lanes.watch().busy() is False
    start, keys = len(SEND_LOG.since(0)), [f"lend:{n}" for n in range(24)]
    failures = lanes.pipeline().enqueue_many([EmailJob(key, f"a@{SENDER_DOMAIN}", ["ada@example.org"],
                                                       subject=f"Receipt {key}", text="x") for key in keys])
    assert failures == []
    lanes.run(until=lambda: len(emails_per_key(start)) == len(keys))
    times = sorted(sent_at(start).values())
    assert emails_per_key(start) == dict.fromkeys(keys, 1)
    fastest_unlent_s = (len(keys) - MAX_CONCURRENCY) / ((1 - URGENT_SHARE) * SEND_RATE)
    assert times[-1] - times[0] < fastest_unlent_s, "bulk did not borrow the idle urgent lane's share"


@pytest.mark.soak  # a flood timed against the emulator; its aim is BENCHMARKS 9d
def test_urgent_jobs_keep_their_share_through_a_bulk_flood_which_gives_it_back(lanes):
    """A bulk flood sending at the whole rate (the loan), then a stream of urgent jobs: they go out at the urgent
    lane's own pace, ahead of the flood's backlog, and while they do, bulk keeps to its own share."""
    lanes.purge()
    start = len(SEND_LOG.since(0))
    bulk = [f"flood:{n}" for n in range(50)]
    urgent = [f"urgent:{n}" for n in range(24)]
    pipeline = lanes.pipeline()
    assert pipeline.enqueue_many([EmailJob(key, f"a@{SENDER_DOMAIN}", ["ada@example.org"],
                                           subject=f"Receipt {key}", text="x") for key in bulk]) == []
    enqueued: list[float] = []

    def urgent_arrives_mid_flood() -> bool:
        sent = emails_per_key(start)
        if not enqueued and sum(sent.values()) >= 16:
            enqueued.append(time.time())
            assert pipeline.enqueue_many([EmailJob(key, f"a@{SENDER_DOMAIN}", ["ada@example.org"],
                                                   subject=f"Receipt {key}", text="x", priority="urgent")
                                          for key in urgent]) == []
        return bool(enqueued) and len(sent) == len(bulk) + len(urgent)

    lanes.run(until=urgent_arrives_mid_flood, bound_s=90)
    assert emails_per_key(start) == dict.fromkeys(bulk + urgent, 1)
    at = sent_at(start)
    urgent_done = max(at[key] for key in urgent)
    urgent_rate = URGENT_SHARE * SEND_RATE
    # 24 urgent jobs at 6/s, the first six at once from full buckets: about 3 s (the flood's backlog alone, 8 s).
    assert urgent_done - enqueued[0] < len(urgent) / urgent_rate + 3
    assert any(at[key] > urgent_done for key in bulk), "the flood drained before the urgent jobs: nothing tested"
    # Once every bulk instance has read the urgent queue (a second) and spent what its bucket held, bulk sends at
    # its own share, 2/s; with the loan it would send 8/s.
    since = enqueued[0] + 1.5
    if urgent_done - since >= 1:
        bulk_during = sum(1 for key in bulk if since <= at[key] <= urgent_done)
        own_rate = (1 - URGENT_SHARE) * SEND_RATE
        assert bulk_during <= own_rate * (urgent_done - since) + MAX_CONCURRENCY + 1, bulk_during


@pytest.mark.soak  # a flood timed against the emulator; its aim is BENCHMARKS 9d
def test_bulk_s_watch_sees_the_urgent_lane_in_use_while_urgent_jobs_come_seconds_apart(flood_lanes):
    """Bulk lends itself the urgent share once the urgent lane's work item says it took no record for 5 s. An
    urgent job is sent and deleted within a tenth of a second of its enqueue, so a read of the urgent queue's counts
    a second later finds nothing: the lane's instances write the item as they take a record, and a watch reading it
    as a bulk instance does, from the deployed pipeline's consumers run as Lambda runs them, finds the lane in use
    from the first job to the last; and every urgent job is sent once, with no batch held for it."""
    lanes = flood_lanes
    lanes.purge()
    start, keys = len(SEND_LOG.since(0)), [f"watched:{n}" for n in range(8)]
    pipeline, watch = lanes.pipeline(), lanes.watch()
    enqueued_at: list[float] = []
    busy_while_in_use: list[bool] = []

    def urgent_jobs_seconds_apart() -> bool:
        now = time.monotonic()
        if len(enqueued_at) < len(keys) and (not enqueued_at or now - enqueued_at[-1] >= URGENT_GAP_S):
            key = keys[len(enqueued_at)]
            assert pipeline.enqueue_many([EmailJob(key, f"a@{SENDER_DOMAIN}", ["ada@example.org"],
                                                   subject=f"Receipt {key}", text="x", priority="urgent")]) == []
            enqueued_at.append(now)
        elif enqueued_at and WATCH_AFTER_S <= now - enqueued_at[-1] < WATCH_AFTER_S + 0.5:
            # A bulk instance reads at any time, not with the enqueue. A second later the urgent instance has sent
            # the job (at once, from a full bucket) and deleted it: only its work item says the lane is in use.
            busy_while_in_use.append(watch.busy())
        return len(emails_per_key(start)) == len(keys) and lanes.depth(lanes.urgent_queue) == 0

    lanes.run(until=urgent_jobs_seconds_apart, bound_s=60, every_s=0.25)
    assert emails_per_key(start) == dict.fromkeys(keys, 1)
    assert busy_while_in_use and all(busy_while_in_use), "bulk would have lent itself the urgent share meanwhile"
