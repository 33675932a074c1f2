"""A job scheduled further ahead than SQS can delay a message waits in the waiting room at a fixed cost, and the
schedule watch sends it back to its lane's queue shortly before its sendAt (docs: scheduling). Through the
emulator over HTTP: the room is DynamoDB's, the queue SQS's, the emails counted in the emulator's SES; the watch
runs as EventBridge's schedule would run it, on the test's clock."""

from __future__ import annotations

import io
import json
import uuid
from collections import Counter
from datetime import UTC, datetime

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, job
from slow_aws import Jobs

from sendonce_contract.message import CONTRACT_VERSION
from sendonce_contract.priority import Priority
from sendonce_contract.waiting_room import DUE, ROOM, ROOM_AFTER_S, ScheduleWatchConfig, room_of
from sendonce_producer import cancel
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.schedule_watch import ScheduleWatch

DAY_MS = 86_400_000
THIRTY_DAYS_S = 30 * 86_400


def make_room() -> str:
    name = f"waiting-room-{uuid.uuid4().hex[:8]}"  # the test's own: the emulator outlives it
    boto3.client("dynamodb").create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": ROOM, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": ROOM, "AttributeType": "S"},
                              {"AttributeName": DUE, "AttributeType": "S"}])
    return name


def counted(client, calls: Counter):
    """``client``, each request it makes counted in ``calls`` by operation."""
    client.meta.events.register("before-call.*.*", lambda model, **_: calls.update([model.name]))
    return client


def at(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def scheduled(key: str, send_at_ms: int) -> dict:
    return job(key, sendAt=at(send_at_ms), contractVersion=CONTRACT_VERSION)


class Room:
    """A pipeline with a waiting room: its consumer, its job queue and its schedule watch, every AWS request the
    consumer and the watch make counted."""

    def __init__(self, pipeline, clock: FakeClock) -> None:
        self.pipeline, self.clock, self.calls = pipeline, clock, Counter()
        self.table = make_room()
        self.jobs = Jobs(f"scheduled-{self.table}")
        self.consumer = pipeline.consumer(clock, queue_url=self.jobs.url, max_receive_count=5,
                                          waiting_room_table=self.table, dedupe_ttl_s=THIRTY_DAYS_S + 86_400)
        for client in (self.consumer.redelivery._client, self.consumer.processor._ledger._client):
            counted(client, self.calls)
        self.watch = ScheduleWatch(ScheduleWatchConfig(self.table, self.jobs.url), counted(
            boto3.client("dynamodb"), self.calls), counted(boto3.client("sqs"), self.calls), clock, io.StringIO())

    def deliver(self, wait_s: float = 10, batch_size: int = 10) -> list[dict]:
        records = self.jobs.receive(wait_s=wait_s, batch_size=batch_size)
        assert records, "a batch was due"
        self.consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts")
        self.jobs.acknowledge(self.consumer.handle(event(*records), FakeContext(self.clock)), *records)
        return [json.loads(line) for line in log.getvalue().splitlines() if '"outcome"' in line]

    def delayed_copies(self) -> int:
        """The job queue's messages, each a delayed copy (SQS's own counts: none visible or in flight)."""
        counts = self.jobs.sqs.get_queue_attributes(QueueUrl=self.jobs.url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        assert counts["ApproximateNumberOfMessages"] == counts["ApproximateNumberOfMessagesNotVisible"] == "0", counts
        return int(counts["ApproximateNumberOfMessagesDelayed"])

    def waiting(self) -> list[dict]:
        return boto3.client("dynamodb").scan(TableName=self.table)["Items"]


def test_a_job_scheduled_30_days_ahead_waits_in_the_room_for_three_requests_and_is_sent_once_at_its_time(
        pipeline):
    clock = FakeClock()
    room = Room(pipeline, clock)
    send_at = clock.now + 30 * DAY_MS
    room.jobs.enqueue(scheduled("reminder:r1:u1", send_at))

    [line] = room.deliver()
    assert line["outcome"] == "scheduled" and "in the waiting room" in line["reason"]
    [item] = room.waiting()
    assert item[ROOM]["S"] == room_of(Priority.BULK.value) and room.jobs.depth() == 0  # acknowledged
    assert room.pipeline.ledger_item("reminder:r1:u1") is None  # nothing claimed: the key can still be cancelled
    waiting = dict(room.calls)
    assert waiting == {"PutItem": 1}, waiting  # the room's one write, for 30 days

    for days in (1, 7, 29):  # the watch runs every minute meanwhile; a run on a day reads and releases nothing
        clock.now = send_at - (30 - days) * DAY_MS
        assert room.watch.run() == (0, 0, 0)
    clock.now = send_at - 1_000  # the last run before its sendAt (its message delayed the second left)
    assert room.watch.run() == (1, 0, 0)
    assert room.waiting() == [] and room.jobs.depth() == 1
    released = {name: count for name, count in room.calls.items() if name != "Query"}
    assert released == {"PutItem": 1, "SendMessageBatch": 1, "BatchWriteItem": 1}  # three requests in all

    clock.now = send_at
    assert [line["outcome"] for line in room.deliver()] == ["sent"]
    assert pipeline.emails_for("reminder:r1:u1") == 1


def test_the_watch_sends_a_job_back_delayed_until_its_send_at():
    """Its message is delayed by the rest of its wait, so it arrives at its sendAt, not when the watch ran."""
    clock = FakeClock()
    table = make_room()
    jobs = Jobs(f"released-{table}")
    sent: list[dict] = []
    sqs = boto3.client("sqs")
    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch",
                             lambda params, **_: sent.extend(params["Entries"]))
    from sendonce_runtime.waiting_room import WaitingRoom

    WaitingRoom(boto3.client("dynamodb"), table, Priority.BULK.value).admit(
        {"MessageBody": "{}", "MessageAttributes": {}}, clock.now + 75_000, "k:1")
    ScheduleWatch(ScheduleWatchConfig(table, jobs.url), boto3.client("dynamodb"), sqs, clock, io.StringIO()).run()
    assert [entry["DelaySeconds"] for entry in sent] == [75]


def test_a_job_delivered_twice_waits_once_and_a_cancelled_one_is_not_sent_when_it_comes_back(pipeline):
    clock = FakeClock()
    room = Room(pipeline, clock)
    send_at = clock.now + 2 * DAY_MS
    for body in (scheduled("reminder:r2:u1", send_at), scheduled("reminder:r2:u1", send_at),
                 scheduled("reminder:r3:u1", send_at)):
        room.jobs.enqueue(body)
    while room.jobs.depth():
        room.deliver(batch_size=1)
        clock.advance(300)  # each delivery at its own moment: the item's time is the job's sendAt, not theirs
    assert len(room.waiting()) == 2  # the copy of r2 found its item: it waits once
    assert cancel(pipeline.table_name, "reminder:r3:u1").cancelled
    clock.now = send_at - 1_000
    assert room.watch.run() == (2, 0, 0)
    clock.now = send_at
    outcomes = {line["dedupeKey"]: line["outcome"] for line in room.deliver()}
    assert outcomes == {"reminder:r2:u1": "sent", "reminder:r3:u1": "cancelled"}
    assert pipeline.emails_for("reminder:r2:u1") == 1 and pipeline.emails_for("reminder:r3:u1") == 0


def test_a_watch_killed_between_its_send_and_its_delete_sends_the_job_again_and_the_ledger_sends_it_once(pipeline):
    clock = FakeClock()
    room = Room(pipeline, clock)
    send_at = clock.now + DAY_MS
    room.jobs.enqueue(scheduled("reminder:r4:u1", send_at))
    room.deliver()
    clock.now = send_at - 1_000

    def killed(**_):
        raise SystemExit("killed at its deadline")

    room.watch._dynamodb.meta.events.register_first("before-call.dynamodb.BatchWriteItem", killed)
    with pytest.raises(SystemExit):
        room.watch.run()
    room.watch._dynamodb.meta.events.unregister("before-call.dynamodb.BatchWriteItem", killed)
    assert len(room.waiting()) == 1  # sent back, not deleted
    assert room.watch.run() == (1, 0, 0)  # the next minute's run sends it again
    clock.now = send_at
    outcomes = [line["outcome"] for line in room.deliver()]
    if len(outcomes) == 1:  # the two arrived apart
        outcomes += [line["outcome"] for line in room.deliver()]
    assert sorted(outcomes) == ["duplicate", "sent"] and pipeline.emails_for("reminder:r4:u1") == 1


def test_another_job_of_the_same_key_and_time_does_not_replace_the_one_waiting_and_meets_the_ledger(pipeline):
    """A producer's mistake: the same key and sendAt with other content. The first waits in the room; the other
    waits as delayed copies, and at their time the ledger sends the key once, the first job's."""
    clock = FakeClock()
    room = Room(pipeline, clock)
    send_at = clock.now + 2 * DAY_MS
    room.jobs.enqueue(scheduled("reminder:r7:u1", send_at))
    room.deliver()
    room.jobs.enqueue(job("reminder:r7:u1", sendAt=at(send_at), contractVersion=CONTRACT_VERSION, text="Other."))
    [line] = room.deliver()
    assert line["outcome"] == "scheduled" and "waiting room" not in line["reason"]
    [item] = room.waiting()
    assert json.loads(json.loads(item["request"]["S"])["MessageBody"]).get("text") != "Other."
    assert room.delayed_copies() == 1  # the other job's copy, its original gone


def test_a_job_sqs_will_never_take_back_goes_to_its_lanes_dlq_with_the_reason_not_left_in_the_room(pipeline):
    """The lane's queue takes less than the job (its maximum lowered by a later deploy): tried alone once more,
    refused for its size, it is dead-lettered with SQS's words; the room is empty, nothing is sent early."""
    clock = FakeClock()
    table = make_room()
    small = boto3.client("sqs").create_queue(QueueName=f"small-{table}", Attributes={"MaximumMessageSize": "1024"})[
        "QueueUrl"]
    from sendonce_runtime.waiting_room import WaitingRoom

    body = json.dumps(job("reminder:r8:u1", text="x" * 2_000))
    assert WaitingRoom(boto3.client("dynamodb"), table, Priority.BULK.value).admit(
        {"MessageBody": body, "MessageAttributes": {}}, clock.now + 60_000, "reminder:r8:u1")
    watch = ScheduleWatch(ScheduleWatchConfig(table, small, dead_letter_queue_url=pipeline.dead_letter_queue_url),
                          boto3.client("dynamodb"), boto3.client("sqs"), clock, io.StringIO())
    assert watch.run() == (1, 0, 0)
    [dead] = pipeline.dead_letters()
    attributes = {name: value["StringValue"] for name, value in dead["MessageAttributes"].items()}
    assert attributes["sendonce.reasonCode"] == "invalid-message" and dead["Body"] == body
    assert "SQS refused to take it back from the waiting room" in attributes["sendonce.reason"]
    assert attributes["sendonce.dedupeKey"] == "reminder:r8:u1"
    assert boto3.client("dynamodb").scan(TableName=table)["Items"] == []


def test_a_job_due_within_sqs_s_longest_delay_or_when_the_room_refuses_it_waits_as_a_delayed_copy(pipeline):
    clock = FakeClock()
    room = Room(pipeline, clock)
    room.jobs.enqueue(scheduled("reminder:r5:u1", clock.now + (ROOM_AFTER_S - 60) * 1000))
    [line] = room.deliver()
    assert line["outcome"] == "scheduled" and "waiting room" not in line["reason"]
    assert room.waiting() == []
    boto3.client("dynamodb").delete_table(TableName=room.table)  # the room gone: DynamoDB refuses the write
    room.jobs.enqueue(scheduled("reminder:r6:u1", clock.now + DAY_MS))
    [line] = room.deliver()
    assert line["outcome"] == "scheduled" and "waiting room" not in line["reason"]
    assert room.delayed_copies() == 2  # both wait as delayed copies, their originals gone: nothing lost


# -- the construct -------------------------------------------------------------------------------------------------

def test_the_construct_makes_the_room_its_watch_and_its_schedule_granted_no_more_than_each_does():
    import aws_cdk as cdk
    from cdk_nag import AwsSolutionsChecks, ServerlessChecks
    from construct_support import build, make_stack, statement_actions

    from sendonce_contract.deploy_config import Env
    from sendonce_contract.waiting_room import WATCH_EVERY_S

    stack = make_stack()
    pipeline, template = build(stack, waiting_room=True, urgent_lane=True)
    assert pipeline.waiting_room is not None
    room_id = stack.get_logical_id(pipeline.waiting_room.table.node.default_child)
    [table] = [r for name, r in template.find_resources("AWS::DynamoDB::Table").items() if name == room_id]
    assert table["Properties"]["KeySchema"] == [{"AttributeName": ROOM, "KeyType": "HASH"},
                                                {"AttributeName": DUE, "KeyType": "RANGE"}]
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    [rule] = template.find_resources("AWS::Events::Rule", {"Properties": {
        "ScheduleExpression": f"rate({WATCH_EVERY_S // 60} minute)"}}).values()
    watch_id = stack.get_logical_id(pipeline.waiting_room.function.node.default_child)
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [watch_id, "Arn"]}
    env = template.find_resources("AWS::Lambda::Function")[watch_id]["Properties"]["Environment"]["Variables"]
    assert env[Env.WAITING_ROOM_TABLE] == {"Ref": room_id} and Env.URGENT_QUEUE_URL in env
    # Both lanes' consumers write into the room (a scheduled job, a parked batch and its stop's marker); the watch
    # reads it, sends to both queues and removes what it sent; it reads and ends the lanes' stops, asking SES.
    for consumer in (pipeline.function, pipeline.urgent_function):
        variables = template.find_resources("AWS::Lambda::Function")[
            stack.get_logical_id(consumer.node.default_child)]["Properties"]["Environment"]["Variables"]
        assert variables[Env.WAITING_ROOM_TABLE] == {"Ref": room_id}
    on_room = [s for policy in template.find_resources("AWS::IAM::Policy").values()
               for s in policy["Properties"]["PolicyDocument"]["Statement"] if room_id in str(s["Resource"])]
    writes = ("dynamodb:PutItem", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem")
    assert sorted(tuple(statement_actions(s)) for s in on_room) == sorted(
        [writes, writes, ("dynamodb:Query", "dynamodb:BatchWriteItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")])
    watch_role = stack.get_logical_id(pipeline.waiting_room.role.node.default_child)
    watch_actions = {action for name, policy in template.find_resources("AWS::IAM::Policy").items()
                     if {"Ref": watch_role} in policy["Properties"]["Roles"]
                     for s in policy["Properties"]["PolicyDocument"]["Statement"] for action in statement_actions(s)}
    assert {"ses:GetAccount", "ses:GetEmailIdentity", "dynamodb:GetItem"} <= watch_actions
    assert not {"ses:SendEmail", "dynamodb:PutItem"} & watch_actions  # it never sends, nor claims a key
    assert {"ScheduleWatchErrors", "ScheduledJobsLeft"} <= set(pipeline.alarms)
    for pack in (AwsSolutionsChecks, ServerlessChecks):
        report = pack(stack.node.root).validate_scope(stack)
        assert report.violations == [] and report.success, report.violations
    _, plain = build(cdk.Stack(cdk.App(), "Plain"))  # on by default on a standard queue
    assert len(plain.find_resources("AWS::DynamoDB::Table")) == 2
    _, fifo = build(cdk.Stack(cdk.App(), "Fifo"), fifo=True)  # off by default on a FIFO queue
    assert len(fifo.find_resources("AWS::DynamoDB::Table")) == 1


def test_a_waiting_room_on_a_fifo_queue_fails_synth_naming_the_rule_and_the_fix():
    from construct_support import build

    from sendonce_constructs import SendOnceConfigurationError

    with pytest.raises(SendOnceConfigurationError, match="waiting_room=True was given with fifo=True: the room "
                                                         "holds jobs scheduled with sendAt, which a FIFO queue "
                                                         "refuses") as error:
        build(waiting_room=True, fifo=True)
    assert "SendOnce.InvalidWaitingRoom" in str(error.value)


# -- EventBridge's part, played by the local tooling ---------------------------------------------------------------

def test_the_local_tooling_plays_the_rooms_schedule_running_the_bundled_watch_in_its_own_process(aws):
    """The rule's target read from a synthesized template; the watch (the bundled runtime, in a worker process as
    Lambda runs it) invoked once a period, here every half second, sends a due job back to its queue."""
    import time

    from construct_support import build, make_stack

    from sendonce_constructs.runtime_asset import runtime_asset_dir
    from sendonce_local.lambda_service.instances import FunctionSpec
    from sendonce_local.lambda_service.schedule_source import ScheduleRunner, read_schedules
    from sendonce_runtime.entry_points import SCHEDULE_WATCH_HANDLER
    from sendonce_runtime.waiting_room import WaitingRoom

    stack = make_stack()
    pipeline, template = build(stack, waiting_room=True)
    assert pipeline.waiting_room is not None
    watch_id = stack.get_logical_id(pipeline.waiting_room.function.node.default_child)
    table = make_room()
    jobs = Jobs(f"played-{table}")
    spec = FunctionSpec("schedule-watch", SCHEDULE_WATCH_HANDLER, runtime_asset_dir(),
                        ScheduleWatchConfig(table, jobs.url).to_env(), timeout_s=30)
    [schedule], unplayed = read_schedules(template.to_json(), {watch_id: spec})
    assert schedule.every_s == 60 and unplayed == []
    now_ms = time.time_ns() // 1_000_000
    WaitingRoom(boto3.client("dynamodb"), table, Priority.BULK.value).admit(
        {"MessageBody": json.dumps(job("reminder:played:u1")), "MessageAttributes": {}}, now_ms, "reminder:played:u1")
    runner = ScheduleRunner(schedule, aws.environment, None, every_s=0.5)
    runner.start()
    try:
        [record] = jobs.receive(wait_s=30)
    finally:
        runner.stop()
    assert json.loads(record["body"])["dedupeKey"] == "reminder:played:u1" and runner.runs >= 1
    assert boto3.client("dynamodb").scan(TableName=table)["Items"] == []
