"""With a waiting room, a job parked while SES stops sending waits there for one write, however long the stop, and
the schedule watch sends the stop's backlog back on its first run after SES says it sends again, in SES's own words
(GetAccount, GetTenant, GetEmailIdentity, GetConfigurationSet), not a refusal's text (docs: when SES stops sending).
Through the emulator over HTTP: the stops are the emulator's SES's own (a paused account, a paused configuration set,
a disabled tenant, an identity deleted, the daily quota), the room DynamoDB's, the queue SQS's, the emails counted
in the emulator's SES; the watch runs as EventBridge's schedule runs it, on the test's clock."""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable

import boto3
import pytest
from consumer_harness import SENDER_DOMAIN, FakeClock, FakeContext, event, job
from ses_fault_proxy import Fault
from slow_aws import Jobs
from test_emulator_ses_account import control
from test_waiting_room import counted, make_room

from sendonce_contract.schema import DeadLetter, ReasonCode, SesStopItem
from sendonce_contract.waiting_room import (
    BELIEVED_AGAIN_AFTER_S,
    ROOM,
    STOPS,
    WATCH_EVERY_S,
    ScheduleWatchConfig,
    StopMarker,
)
from sendonce_local.emulator.ses_account import ACCOUNT_CONTROL_PATH
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.redelivery import parked_margin_s
from sendonce_runtime.schedule_watch import ScheduleWatch

MINUTE_MS = WATCH_EVERY_S * 1000
HOUR_MS = 60 * MINUTE_MS


class StoppedRoom:
    """A pipeline with a waiting room: its consumer, its job queue and its schedule watch (asking the emulator's
    SES), every DynamoDB and SQS request of the consumer and the watch counted."""

    def __init__(self, pipeline, clock: FakeClock, name: str, **overrides) -> None:
        self.pipeline, self.clock, self.calls = pipeline, clock, Counter()
        self.table = make_room()
        self.jobs = Jobs(f"{name}-{self.table}")
        self.consumer = pipeline.consumer(clock, queue_url=self.jobs.url, max_receive_count=5,
                                          waiting_room_table=self.table, sender_identity=SENDER_DOMAIN,
                                          queue_retention_s=4 * 86_400, **overrides)
        for client in (self.consumer.redelivery._client, self.consumer.processor._ledger._client):
            counted(client, self.calls)
        config = ScheduleWatchConfig(self.table, self.jobs.url, ledger_table_name=pipeline.table_name,
                                     sender_identity=SENDER_DOMAIN,
                                     configuration_set=overrides.get("configuration_set"))
        self.watch = ScheduleWatch(config, counted(boto3.client("dynamodb"), self.calls),
                                   counted(boto3.client("sqs"), self.calls), clock, io.StringIO(),
                                   ses=boto3.client("sesv2"))

    def deliver(self, batch_size: int = 10) -> list[dict]:
        """One batch as Lambda's event source delivers it: received, handled, acknowledged; its outcome lines."""
        records = self.jobs.receive(wait_s=5, batch_size=batch_size)
        assert records, "a batch was due"
        self.consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts")
        self.jobs.acknowledge(self.consumer.handle(event(*records), FakeContext(self.clock)), *records)
        return [json.loads(line) for line in log.getvalue().splitlines() if '"outcome"' in line]

    def deliver_all(self, count: int) -> list[dict]:
        """Batches delivered until ``count`` records were handled (SQS may hand fewer than ten to a receive)."""
        lines: list[dict] = []
        while len(lines) < count:
            lines += self.deliver()
        return lines

    def parked(self) -> list[dict]:
        """The room's parked jobs, in the order the watch sends them back."""
        items = boto3.client("dynamodb").scan(TableName=self.table)["Items"]
        return sorted((item for item in items if item[ROOM]["S"] != STOPS and " stop " in item[ROOM]["S"]),
                      key=lambda item: item["due"]["S"])

    def markers(self) -> list[StopMarker]:
        items = boto3.client("dynamodb").scan(TableName=self.table)["Items"]
        return [StopMarker.from_item(item) for item in items if item[ROOM]["S"] == STOPS]

    def stop_item(self, scope: str = "account") -> dict:
        return boto3.client("dynamodb").get_item(TableName=self.pipeline.table_name, Key={
            SesStopItem.KEY: {"S": SesStopItem.key(None, None, scope)}}).get("Item", {})


def set_quota(aws, most: int) -> None:
    assert control(aws.endpoint, ACCOUNT_CONTROL_PATH, {"max24HourSend": most})[0] == 200


def pause_account(aws, ses) -> Callable[[], None]:
    ses.put_account_sending_attributes(SendingEnabled=False)
    return lambda: ses.put_account_sending_attributes(SendingEnabled=True)


def lapse_identity(aws, ses) -> Callable[[], None]:
    ses.delete_email_identity(EmailIdentity=SENDER_DOMAIN)  # its verification lapsed: SES refuses its From
    return lambda: ses.create_email_identity(EmailIdentity=SENDER_DOMAIN)


EVENTS_SET = "receipts-events"  # the pipeline's configuration set, for the stop of its own pause


def pause_configuration_set(aws, ses) -> Callable[[], None]:
    ses.create_configuration_set(ConfigurationSetName=EVENTS_SET)
    ses.put_configuration_set_sending_options(ConfigurationSetName=EVENTS_SET, SendingEnabled=False)
    return lambda: ses.put_configuration_set_sending_options(ConfigurationSetName=EVENTS_SET, SendingEnabled=True)


def use_up_quota(aws, ses) -> Callable[[], None]:
    set_quota(aws, 1)
    ses.send_email(FromEmailAddress=f"shop@{SENDER_DOMAIN}", Destination={"ToAddresses": ["ada@example.org"]},
                   Content={"Simple": {"Subject": {"Data": "the day's one"}, "Body": {"Text": {"Data": "."}}}})
    return lambda: set_quota(aws, 1_000)  # raised through AWS support


def disable_tenant(aws, ses) -> Callable[[], None]:
    arn = ses.create_tenant(TenantName="acme")["TenantArn"]
    ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", ReputationEntityReference=arn, SendingStatus="DISABLED")
    return lambda: ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", ReputationEntityReference=arn, SendingStatus="REINSTATED")


# Each kind of stop: how the emulator's SES plays it, what the lane learns, and the scope it parks.
STOPS_PLAYED = {
    "a paused account": (pause_account, "ses_stopped", "paused", "account", {}),
    "a paused configuration set": (pause_configuration_set, "ses_stopped", "paused", "account",
                                   {"configuration_set": EVENTS_SET}),
    "a lapsed sender identity": (lapse_identity, "ses_stopped", "setup", "account", {}),
    "the daily quota": (use_up_quota, "quota_exhausted", "quota", "account", {}),
    "a disabled tenant": (disable_tenant, "ses_stopped", "paused", "tenant/acme", {"ses_tenants": True}),
}


@pytest.mark.parametrize("kind", list(STOPS_PLAYED))
def test_a_stops_backlog_waits_in_the_room_and_moves_on_the_watchs_first_run_after_ses_sends_again(
        pipeline, aws, kind):
    stop, outcome, stop_kind, scope, overrides = STOPS_PLAYED[kind]
    clock = FakeClock()
    room = StoppedRoom(pipeline, clock, kind.replace(" ", "-"), **overrides)
    resume = stop(aws, boto3.client("sesv2"))
    tenant = {"tenant": "acme"} if scope != "account" else {}
    keys = [f"receipt:s{n}:u1" for n in range(12)]
    for key in keys:
        room.jobs.enqueue(job(key, **tenant))
    lines = room.deliver_all(12)
    assert [line["outcome"] for line in lines] == [outcome] * 12
    assert all("in the waiting room until SES sends again" in line["reason"] for line in lines), lines[0]
    assert pipeline.emails_per_key() == {} and room.jobs.depth() == 0 and pipeline.dead_letters() == []
    assert len(room.parked()) == 12 and [m.kind for m in room.markers()] == [stop_kind]
    assert room.stop_item(scope)[SesStopItem.KIND]["S"] == stop_kind
    parking = dict(room.calls)

    # The watch's runs come every minute; here closer, so that all of them fall within the consumer's own minute
    # before it asks SES again: the backlog moves on the watch's word alone.
    for _ in range(3):  # the stop holds: each run asks SES and leaves the backlog where it is
        clock.advance(MINUTE_MS // 6)
        assert room.watch.run() == (0, 0, 0)
    assert len(room.parked()) == 12

    resume()
    clock.advance(MINUTE_MS // 6)  # the watch's next run after SES sends again
    assert room.watch.run() == (12, 0, 12)
    assert room.parked() == [] and SesStopItem.RESUMED_AT in room.stop_item(scope)
    # Back at once, before the consumer's own next probe: each goes to SES whatever the consumer last heard.
    assert sorted(line["outcome"] for line in room.deliver_all(12)) == ["sent"] * 12
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert pipeline.dead_letters() == [] and room.jobs.depth() == 0

    # What the stop cost its jobs, its whole length: the consumer's (the first job's claim and release, the lane's
    # stop item, a marker and a batch write per batch into the room) and the watch's (its sends and deletes); the
    # receives and deletes Lambda makes, a fifth of a request a job each way, are not in these counts.
    released = {name: room.calls[name] - parking.get(name, 0) for name in ("SendMessageBatch", "BatchWriteItem")}
    assert parking.get("BatchWriteItem", 0) == 2 and released == {"SendMessageBatch": 2, "BatchWriteItem": 1}
    assert sum(parking.values()) + sum(released.values()) <= len(keys), (parking, released)  # a request a job
    assert "SendMessage" not in room.calls and "ChangeMessageVisibilityBatch" not in room.calls  # no copies

    clock.advance(BELIEVED_AGAIN_AFTER_S * 1000)
    room.watch.run()
    assert room.markers() == []  # nothing parked since: the marker goes


def test_a_day_long_stop_costs_its_jobs_nothing_while_it_lasts(pipeline, aws):
    clock = FakeClock()
    room = StoppedRoom(pipeline, clock, "day-long")
    resume = pause_account(aws, boto3.client("sesv2"))
    for n in range(10):
        room.jobs.enqueue(job(f"receipt:d{n}:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"] * 10
    parked = dict(room.calls)
    for _ in range(24):
        clock.advance(HOUR_MS)
        assert room.watch.run() == (0, 0, 0)
    per_run = {name: (room.calls[name] - parked.get(name, 0)) / 24 for name in room.calls
               if room.calls[name] > parked.get(name, 0)}
    # The lane's schedule, the stops, and the stop's jobs at their bound (a Query each); the stop item (GetItem):
    # the run's, whatever the number of jobs waiting (and SES's GetAccount, not counted here).
    assert per_run == {"Query": 3, "GetItem": 1}, per_run
    resume()
    clock.advance(MINUTE_MS)
    assert room.watch.run() == (10, 0, 10)
    assert sorted(line["outcome"] for line in room.deliver()) == ["sent"] * 10


def test_a_job_parked_as_long_as_the_queue_keeps_a_message_is_sent_back_and_dead_lettered_as_ses_paused(
        pipeline, aws):
    clock = FakeClock()
    retention_s = 3_600
    room = StoppedRoom(pipeline, clock, "retention")
    room.consumer.redelivery._retention_s = retention_s
    pause_account(aws, boto3.client("sesv2"))
    room.jobs.enqueue(job("receipt:r1:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"]
    clock.advance((retention_s - parked_margin_s(retention_s)) * 1000 - MINUTE_MS)
    assert room.watch.run() == (0, 0, 0)  # not yet at its bound
    clock.advance(2 * MINUTE_MS)  # (its bound counts from its SentTimestamp, the emulator's clock's, moments on)
    assert room.watch.run() == (1, 0, 0)  # at its bound, the stop still holding: back to its consumer
    [line] = room.deliver()
    assert line["outcome"] == "ses_stopped_too_long"
    [letter] = pipeline.dead_letters()
    assert letter["MessageAttributes"][DeadLetter.REASON_CODE]["StringValue"] == ReasonCode.SES_PAUSED
    assert aws.ses_sends() == [] and room.parked() == []


def test_when_ses_says_it_sends_but_still_refuses_the_stop_is_believed_again_only_after_a_while(
        pipeline, ses_faults, aws):
    """SES's status and its refusals disagree (here the fault proxy refuses what the account would send): one
    release on SES's word, then the stop's jobs wait the old 15 minutes before SES's word is asked again."""
    clock = FakeClock()
    room = StoppedRoom(pipeline, clock, "contradicted")
    for n in range(3):
        room.jobs.enqueue(job(f"receipt:c{n}:u1"))
    ses_faults.script(Fault.SENDING_PAUSED, Fault.SENDING_PAUSED)
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"] * 3
    clock.advance(MINUTE_MS)
    assert room.watch.run() == (3, 0, 3)  # GetAccount says sending: released
    # The first refused again: the others parked again without asking SES each.
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"] * 3
    assert ses_faults.send_requests == 2 and len(room.parked()) == 3
    for _ in range(BELIEVED_AGAIN_AFTER_S // WATCH_EVERY_S - 2):
        clock.advance(MINUTE_MS)
        assert room.watch.run() == (0, 0, 0)
    clock.advance(2 * MINUTE_MS)
    assert room.watch.run() == (3, 0, 3)  # asked again, and the refusals have ended
    assert sorted(line["outcome"] for line in room.deliver()) == ["sent"] * 3
    assert pipeline.dead_letters() == []


def test_a_consumers_own_probe_ends_the_stop_and_the_watch_sends_the_backlog_back(pipeline, ses_faults, aws):
    """The stop item marked over by a send SES accepted (the lane's probe) ends the stop for the watch too, without
    asking SES: the backlog goes back on its next run."""
    clock = FakeClock()
    room = StoppedRoom(pipeline, clock, "probed")
    for n in range(3):
        room.jobs.enqueue(job(f"receipt:p{n}:u1"))
    ses_faults.script(Fault.SENDING_PAUSED)
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"] * 3
    clock.advance(MINUTE_MS)
    room.jobs.enqueue(job("receipt:p3:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["sent"]  # the lane's probe, accepted
    asked = Counter()
    counted(room.watch._ses, asked)
    assert room.watch.run() == (3, 0, 3) and asked == Counter()
    assert sorted(line["outcome"] for line in room.deliver()) == ["sent"] * 3
    assert room.markers() == []


def test_a_backlog_larger_than_a_run_reaches_keeps_its_marker_until_every_job_is_back(pipeline, ses_faults, aws):
    """A run that stops for time with the stop's jobs half sent back keeps the stop's marker, so the next run sends
    the rest: none is left in the room with nothing to lead the watch to it."""
    from sendonce_contract.waiting_room import PAGE_ITEMS
    from sendonce_runtime.schedule_watch import PAGE_MARGIN_MS
    from sendonce_runtime.waiting_room import WaitingRoom

    clock = FakeClock()
    room = StoppedRoom(pipeline, clock, "outrun")
    ses_faults.script(Fault.SENDING_PAUSED)
    room.jobs.enqueue(job("receipt:o0:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"]
    [stop] = room.consumer.processor._stops._stops.values()
    backlog = [(json.loads(item["request"]["S"]), f"receipt:o{n}:u1", clock.now + n)  # as the consumer writes them
               for n, item in enumerate(room.parked() * (PAGE_ITEMS + 20), start=1)]
    assert len(WaitingRoom(boto3.client("dynamodb"), room.table, "bulk").park(stop, backlog)) == len(backlog)
    clock.advance(MINUTE_MS)
    room.jobs.enqueue(job("receipt:probe:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["sent"]  # the lane's probe: the stop is over

    # Time for the schedule room, the stop, and the first page of its jobs, then none.
    reads = iter([PAGE_MARGIN_MS + 1] * 3)
    released, _, _ = room.watch.run(lambda: next(reads, 0))
    assert 0 < released < len(backlog) + 1 and len(room.markers()) == 1, released
    assert room.watch.run() == (len(backlog) + 1 - released, 0, len(backlog) + 1 - released)
    assert room.parked() == [] and room.markers() == []


def test_a_job_parked_while_the_watch_removes_its_stops_marker_is_sent_back_by_the_next_run(
        pipeline, ses_faults, aws):
    """An instance that still believes the stop parks a job just as the watch, the room empty, removes the stop's
    marker: the marker it writes after its job leads the next run to it."""
    clock, stale_clock = FakeClock(), FakeClock()  # the other instance's minute has not come round yet
    room = StoppedRoom(pipeline, clock, "raced")
    stale = room.pipeline.consumer(stale_clock, queue_url=room.jobs.url, max_receive_count=5,
                                   waiting_room_table=room.table, sender_identity=SENDER_DOMAIN)
    ses_faults.script(Fault.SENDING_PAUSED, Fault.SENDING_PAUSED)
    room.jobs.enqueue(job("receipt:r0:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["ses_stopped"]
    room.jobs.enqueue(job("receipt:r1:u1"))
    records = room.jobs.receive(wait_s=5)
    room.jobs.acknowledge(stale.handle(event(*records), FakeContext(stale_clock)), *records)  # it learns it too
    clock.advance(MINUTE_MS)
    room.jobs.enqueue(job("receipt:r2:u1"))
    assert [line["outcome"] for line in room.deliver()] == ["sent"]  # the first's probe: the stop is over

    arriving = Jobs(f"raced-arriving-{room.table}")  # a job handed to the other instance

    def park_meanwhile(**_):
        room.watch._dynamodb.meta.events.unregister("before-call.dynamodb.DeleteItem", park_meanwhile)
        arriving.enqueue(job("receipt:r3:u1"))
        late = arriving.receive(wait_s=5)
        arriving.acknowledge(stale.handle(event(*late), FakeContext(stale_clock)), *late)  # parked: still stopped

    room.watch._dynamodb.meta.events.register("before-call.dynamodb.DeleteItem", park_meanwhile)
    assert room.watch.run()[:2] == (2, 0)  # r0 and r1 back; the marker's removal refused: r3 was parked
    assert len(room.parked()) == 1 and len(room.markers()) == 1
    assert room.watch.run() == (1, 0, 1)
    assert sorted(line["outcome"] for line in room.deliver_all(3)) == ["sent"] * 3
    assert {f"receipt:r{n}:u1": pipeline.emails_for(f"receipt:r{n}:u1") for n in range(4)} == dict.fromkeys(
        (f"receipt:r{n}:u1" for n in range(4)), 1)
