"""When SES stops sending (a paused account, a refusal that names the pipeline's setup, the daily quota), a lane
learns it from one refusal, parks each job as a delayed copy without asking SES or spending a receive, asks SES
again once a minute whatever its number of instances, and sends every job once when SES sends again (docs: when
SES stops sending). Through the emulator over HTTP: the job queue is SQS's, the refusals SES's (its own for an
unverified identity; scripted by the fault proxy for the others), the emails counted in the emulator's SES."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections import Counter
from datetime import UTC, datetime

import boto3
import pytest
from botocore.exceptions import ClientError
from consumer_harness import SENDER_DOMAIN, FakeClock, FakeContext, event, job
from ses_fault_proxy import Fault
from slow_aws import Jobs
from slow_aws import consumer as slow_consumer

from sendonce_contract.deploy_config import TimeBudget
from sendonce_contract.message import CONTRACT_VERSION
from sendonce_contract.outcome_events import SENDING_RESUMED, SENDING_STOPPED, transitions
from sendonce_contract.schema import CopyAttribute, DeadLetter, SesStopItem
from sendonce_local.emulator.slow_services import LATE, Rule
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.redelivery import parked_margin_s
from sendonce_runtime.ses_stops import PROBE_EVERY_MS

MINUTE_MS = PROBE_EVERY_MS + 1_000


def stopped_consumer(pipeline, jobs: Jobs, clock: FakeClock, **overrides):
    """The consumer as deployed, its parked copies visible at once (the delay itself, 15 minutes, is held in
    test_throttling.py), its log lines kept."""
    consumer = pipeline.consumer(clock, queue_url=jobs.url, max_receive_count=5, sender_identity=SENDER_DOMAIN,
                                 **overrides)
    consumer.redelivery.postponement_s = lambda outcome, postponements: 0
    log = io.StringIO()
    consumer.log = OutcomeLog(log, pipeline="Shop/Receipts")
    return consumer, log


def deliver(consumer, jobs: Jobs, clock: FakeClock, budget_ms: int | None = None, batch_size: int = 10) -> list[dict]:
    """One batch as Lambda's event source delivers it: received, handled, acknowledged; the log lines it wrote."""
    records = jobs.receive(batch_size=batch_size)
    assert records, "a batch was due"
    before = len(consumer.log._stream.getvalue().splitlines())
    context = FakeContext(clock) if budget_ms is None else FakeContext(clock, budget_ms=budget_ms)
    jobs.acknowledge(consumer.handle(event(*records), context), *records)
    return [json.loads(line) for line in consumer.log._stream.getvalue().splitlines()[before:]]


def stop_item(pipeline, scope: str = "account") -> dict:
    key = SesStopItem.key(None, None, scope)
    return boto3.client("dynamodb").get_item(TableName=pipeline.table_name,
                                             Key={SesStopItem.KEY: {"S": key}}).get("Item", {})


def test_a_paused_account_is_learned_once_asked_once_a_minute_and_every_job_sent_once(pipeline, ses_faults, aws):
    jobs, clock = Jobs("paused"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    keys = [f"receipt:p{n}:u1" for n in range(6)]
    for key in keys:
        jobs.enqueue(job(key))
    ses_faults.script(Fault.SENDING_PAUSED, Fault.SENDING_PAUSED)  # the first send, then the first minute's probe

    lines = deliver(consumer, jobs, clock)
    assert [line["outcome"] for line in lines] == ["ses_stopped"] * 6
    assert all(line["SesStopped"] == 1 and line["postponedSeconds"] >= 0 for line in lines)
    assert ses_faults.send_requests == 1  # learned from one refusal: the other five never asked SES
    item = stop_item(pipeline)
    assert item[SesStopItem.KIND]["S"] == "paused" and SesStopItem.RESUMED_AT not in item
    assert "SendingPausedException" in item[SesStopItem.REASON]["S"]

    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"] * 6  # the copies
    assert ses_faults.send_requests == 1 and jobs.depth() == 6  # one message per job: copies replace them

    clock.advance(MINUTE_MS)  # a minute on, one job asks SES, which is still paused
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"] * 6
    assert ses_faults.send_requests == 2

    clock.advance(MINUTE_MS)  # SES sends again: the probe is accepted and the lane sends
    assert sorted(line["outcome"] for line in deliver(consumer, jobs, clock)) == ["sent"] * 6
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert SesStopItem.RESUMED_AT in stop_item(pipeline)
    assert pipeline.dead_letters() == [] and jobs.depth() == 0


def test_a_one_time_code_parked_behind_a_stop_expires_instead_of_going_when_ses_sends_again(pipeline, ses_faults):
    jobs, clock = Jobs("paused-codes"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    expires_at = datetime.fromtimestamp((clock.now + 90_000) / 1000, UTC).isoformat()
    jobs.enqueue(job("receipt:x1:u1"))
    jobs.enqueue(job("otp:x2:u1", expiresAt=expires_at, contractVersion=CONTRACT_VERSION))
    ses_faults.script(Fault.SENDING_PAUSED, Fault.SENDING_PAUSED)  # the first send, then the first minute's probe
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"] * 2
    clock.advance(MINUTE_MS)
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"] * 2

    clock.advance(MINUTE_MS)  # SES sends again, after the code's 90 s
    outcomes = {line["dedupeKey"]: line["outcome"] for line in deliver(consumer, jobs, clock)}
    assert outcomes == {"receipt:x1:u1": "sent", "otp:x2:u1": "expired"}
    assert pipeline.emails_for("receipt:x1:u1") == 1 and pipeline.emails_for("otp:x2:u1") == 0
    assert pipeline.dead_letters() == [] and jobs.depth() == 0


def test_a_lanes_instances_ask_ses_once_a_minute_between_them(pipeline, ses_faults):
    jobs, clock = Jobs("two-instances"), FakeClock()
    first, _ = stopped_consumer(pipeline, jobs, clock)
    second, _ = stopped_consumer(pipeline, jobs, clock)
    for n in range(4):
        jobs.enqueue(job(f"receipt:i{n}:u1"))
    ses_faults.script(*[Fault.SENDING_PAUSED] * 3)  # each instance's first send, and the first minute's probe
    deliver(first, jobs, clock)
    deliver(second, jobs, clock)  # it learns from its own refusal, and takes the lane's probe time
    assert ses_faults.send_requests == 2

    clock.advance(MINUTE_MS)
    deliver(first, jobs, clock)  # this one's turn: one probe
    deliver(second, jobs, clock)  # the lane asked this minute already: every job parked
    assert ses_faults.send_requests == 3

    clock.advance(MINUTE_MS)  # SES sends again
    sent = [line["outcome"] for line in deliver(first, jobs, clock)]
    assert sent.count("sent") == 4 and pipeline.dead_letters() == []


def test_an_instance_killed_while_parked_leaves_one_message_per_job_and_sends_each_once(pipeline, ses_faults):
    jobs, clock = Jobs("killed-parked"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    keys = [f"receipt:k{n}:u1" for n in range(3)]
    for key in keys:
        jobs.enqueue(job(key))
    ses_faults.script(Fault.SENDING_PAUSED)
    records = jobs.receive()
    consumer.handle(event(*records), FakeContext(clock))  # killed before Lambda acknowledged the batch
    assert jobs.depth() <= 2 * len(keys)
    deliver(consumer, jobs, clock)  # the copies arrive: each deletes its original
    assert jobs.depth() == len(keys)

    clock.advance(MINUTE_MS)
    while jobs.depth():
        deliver(consumer, jobs, clock)
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert pipeline.dead_letters() == []


def sqs_requests(consumer) -> Counter[str]:
    """The consumer's own SQS requests from now on, by operation (its client's, as botocore makes them)."""
    counted: Counter[str] = Counter()
    consumer.redelivery._client.meta.events.register(
        "before-call.sqs", lambda model, **_: counted.update([model.name]))
    return counted


def paused_three_second_lane(pipeline, ses_faults, queue: str, tag: str, count: int):
    """``count`` jobs on a lane whose next send SES refuses as paused, its consumer sized for a 3 s function (its
    originals' visibility ends before their copies come, so the copies hold them): (jobs, clock, consumer, keys)."""
    jobs, clock = Jobs(queue), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock, time_budget=TimeBudget.for_function_timeout(3))
    keys = [f"receipt:{tag}{n}:u1" for n in range(count)]
    for key in keys:
        jobs.enqueue(job(key))
    ses_faults.script(Fault.SENDING_PAUSED)
    return jobs, clock, consumer, keys


def test_a_batchs_parked_jobs_are_copied_together_one_request_per_call_for_ten_jobs(pipeline, ses_faults):
    jobs, clock, consumer, keys = paused_three_second_lane(pipeline, ses_faults, "parked-together", "b", 10)
    counted = sqs_requests(consumer)
    three_s = 3_000
    assert [line["outcome"] for line in deliver(consumer, jobs, clock, three_s)] == ["ses_stopped"] * 10
    # The originals held until their copies can have deleted them, and the copies: one request each for the ten.
    assert counted == Counter({"ChangeMessageVisibilityBatch": 1, "SendMessageBatch": 1})
    counted.clear()
    assert [line["outcome"] for line in deliver(consumer, jobs, clock, three_s)] == ["ses_stopped"] * 10
    # The copies' delete of their originals too, once for the batch.
    assert counted == Counter({"DeleteMessageBatch": 1, "ChangeMessageVisibilityBatch": 1, "SendMessageBatch": 1})
    assert jobs.depth() == 10 and ses_faults.send_requests == 1

    clock.advance(MINUTE_MS)
    assert sorted(line["outcome"] for line in deliver(consumer, jobs, clock)) == ["sent"] * 10
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert jobs.depth() == 0 and pipeline.dead_letters() == []


KILLED = "killed before the acknowledgement"
PARKED_FAULTS = {"copies' answer lost": [Rule("sqs", "SendMessageBatch", LATE)],
                 "holds' answer lost": [Rule("sqs", "ChangeMessageVisibilityBatch", LATE)],
                 "deletes' answer lost": [Rule("sqs", "DeleteMessageBatch", LATE)],
                 "copies refused": [Rule("sqs", "SendMessageBatch", "RequestThrottled")],
                 KILLED: []}


@pytest.mark.parametrize("fault", list(PARKED_FAULTS))
def test_parked_copies_made_together_leave_one_message_per_job_through_lost_answers_and_kills(
        pipeline, ses_faults, slow, fault):
    jobs, clock = Jobs(f"parked-{list(PARKED_FAULTS).index(fault)}"), FakeClock()
    consumer, log = slow_consumer(pipeline, slow, jobs, clock, sender_identity=SENDER_DOMAIN)
    consumer.redelivery.postponement_s = lambda outcome, postponements: 0
    keys = [f"receipt:l{n}:u1" for n in range(4)]
    for key in keys:
        jobs.enqueue(job(key))
    ses_faults.script(Fault.SENDING_PAUSED)
    received = []
    for delivery in range(3):  # in batches of two: the originals, then copies (which delete their originals)
        slow.fault(*PARKED_FAULTS[fault])
        records = jobs.receive(batch_size=2)
        response = consumer.handle(event(*records), FakeContext(clock, budget_ms=3_000))  # sized for 3 s: held
        slow.clear()
        received += records
        if fault != KILLED:
            jobs.acknowledge(response, *records)
        assert jobs.depth() <= 2 * len(keys), (fault, delivery, jobs.depth())
    assert ses_faults.send_requests == 1  # learned once: no parked job asked SES
    assert slow.hits or not PARKED_FAULTS[fault]  # the fault met the batch calls
    # SES sends again a minute on; the messages held out of sight come back (as their timeouts would end).
    clock.advance(MINUTE_MS)
    for record in received:
        with contextlib.suppress(ClientError):  # deleted by its copy since
            jobs.sqs.change_message_visibility(QueueUrl=jobs.url, ReceiptHandle=record["receiptHandle"],
                                               VisibilityTimeout=0)
    bound = time.monotonic() + 60
    while jobs.depth() and time.monotonic() < bound:
        records = jobs.receive(wait_s=3)
        if records:
            jobs.acknowledge(consumer.handle(event(*records), FakeContext(clock)), *records)
    emails = {key: pipeline.emails_for(key) for key in keys}
    assert emails == dict.fromkeys(keys, 1), unsent_story(pipeline, jobs, log, [k for k, n in emails.items() if n != 1])
    assert jobs.depth() == 0 and pipeline.dead_letters() == []


def unsent_story(pipeline, jobs: Jobs, log: io.StringIO, keys: list[str]) -> str:
    """What became of jobs not sent once: where their messages are, their ledger records, the consumer's lines."""
    lines = [line for line in log.getvalue().splitlines() if any(key in line for key in keys)]
    return "\n".join([f"queue depth {jobs.depth()}, DLQ {pipeline.dead_letters()}",
                      *(f"ledger {key}: {pipeline.ledger_item(key)}" for key in keys), *lines])


def test_a_lapsed_sender_identity_parks_every_job_instead_of_dead_lettering_them(pipeline, ses_faults):
    jobs, clock = Jobs("lapsed"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    ses = boto3.client("sesv2")
    ses.delete_email_identity(EmailIdentity=SENDER_DOMAIN)  # its verification lapsed: SES refuses its From
    keys = [f"receipt:v{n}:u1" for n in range(3)]
    for key in keys:
        jobs.enqueue(job(key))
    lines = deliver(consumer, jobs, clock)
    assert [line["outcome"] for line in lines] == ["ses_stopped"] * 3 and pipeline.dead_letters() == []
    assert "not verified" in lines[0]["reason"] and ses_faults.send_requests == 1
    assert stop_item(pipeline)[SesStopItem.KIND]["S"] == "setup"

    ses.create_email_identity(EmailIdentity=SENDER_DOMAIN)  # verified again
    clock.advance(MINUTE_MS)
    assert sorted(line["outcome"] for line in deliver(consumer, jobs, clock)) == ["sent"] * 3
    assert pipeline.dead_letters() == []


def test_a_from_outside_the_pipelines_identity_is_the_jobs_fault_and_stops_nothing(pipeline, ses_faults):
    jobs, clock = Jobs("outsider"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    jobs.enqueue(job("receipt:o1:u1", **{"from": "Billing <billing@unverified-shop.example>"}))
    jobs.enqueue(job("receipt:o2:u1"))
    lines = deliver(consumer, jobs, clock)
    assert sorted(line["outcome"] for line in lines) == ["refused", "sent"]
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"][DeadLetter.REASON_CODE]["StringValue"] == "ses-refused"
    assert stop_item(pipeline) == {}


@pytest.mark.parametrize(("own_set", "outcome"), [(None, "ses_stopped"), ("marketing", "refused")],
                         ids=["the-pipelines-set", "the-jobs-own-set"])
def test_a_missing_configuration_set_stops_the_lane_only_when_it_is_the_pipelines(
        pipeline, ses_faults, own_set, outcome):
    jobs, clock = Jobs("missing-set"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock, configuration_set="receipts")
    jobs.enqueue(job("receipt:c1:u1", **({"configurationSet": own_set} if own_set else {})))
    ses_faults.script(Fault.CONFIGURATION_SET_MISSING)
    [line] = deliver(consumer, jobs, clock)
    assert line["outcome"] == outcome
    assert len(pipeline.dead_letters()) == (outcome == "refused")


def test_the_daily_quota_parks_the_lane_and_sends_when_the_window_frees_it(pipeline, ses_faults):
    jobs, clock = Jobs("quota"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    for n in range(3):
        jobs.enqueue(job(f"receipt:q{n}:u1"))
    ses_faults.script(Fault.QUOTA)
    lines = deliver(consumer, jobs, clock)
    assert [line["outcome"] for line in lines] == ["quota_exhausted"] * 3 and ses_faults.send_requests == 1
    assert stop_item(pipeline)[SesStopItem.KIND]["S"] == "quota"
    clock.advance(MINUTE_MS)
    assert sorted(line["outcome"] for line in deliver(consumer, jobs, clock)) == ["sent"] * 3
    assert {n: pipeline.emails_for(f"receipt:q{n}:u1") for n in range(3)} == dict.fromkeys(range(3), 1)
    assert pipeline.dead_letters() == [] and jobs.depth() == 0


def test_a_job_waits_no_longer_than_the_queue_keeps_a_message_then_is_dead_lettered_as_ses_paused(
        pipeline, ses_faults):
    jobs, clock = Jobs("too-long"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock, queue_retention_s=3_600)
    jobs.enqueue(job("receipt:l1:u1"))
    ses_faults.script(*[Fault.SENDING_PAUSED] * 10)
    [line] = deliver(consumer, jobs, clock)
    assert line["outcome"] == "ses_stopped" and pipeline.dead_letters() == []
    [copy] = jobs.receive()
    queued_at = int(copy["messageAttributes"][CopyAttribute.PARKED_SINCE]["stringValue"])
    assert abs(queued_at - clock.now) < 60_000  # the message's own SentTimestamp, carried by each copy
    consumer.redelivery.postponement_s = lambda outcome, postponements: 900  # the real wait
    # The last wait ends a quarter of this hour's retention before it (an event source may be behind a backlog):
    # 35 minutes on, a 15-minute copy would end later than that, so the last one is shorter.
    margin_s = parked_margin_s(3_600)
    assert margin_s == 900
    clock.advance(35 * 60_000)
    before = len(consumer.log._stream.getvalue().splitlines())
    consumer.handle(event(copy), FakeContext(clock))
    [line] = [json.loads(text) for text in consumer.log._stream.getvalue().splitlines()[before:]]
    left_s = (queued_at + 3_600_000 - clock.now) // 1000
    assert line["outcome"] == "ses_stopped" and line["postponedSeconds"] == left_s - margin_s < 900
    # With less than that left, no copy: into the DLQ with its reason.
    clock.advance((left_s - margin_s + 30) * 1000)
    consumer.handle(event(copy), FakeContext(clock))
    [dead] = pipeline.dead_letters()
    attributes = dead["MessageAttributes"]
    assert attributes[DeadLetter.REASON_CODE]["StringValue"] == "ses-paused"
    assert "redrive once SES sends again" in attributes[DeadLetter.REASON]["StringValue"]
    assert pipeline.emails_for("receipt:l1:u1") == 0


def test_a_stop_and_its_end_are_outcome_events_with_the_stops_id():
    key = {SesStopItem.KEY: {"S": SesStopItem.key("Shop/Receipts", "bulk", "tenant/acme")}}
    stopped = {**key, SesStopItem.KIND: {"S": "paused"}, SesStopItem.SCOPE: {"S": "tenant/acme"},
               SesStopItem.LANE: {"S": "bulk"}, SesStopItem.REASON: {"S": "SendingPausedException: paused"},
               SesStopItem.STOPPED_AT: {"N": "1000"}, SesStopItem.PROBE_AT: {"N": "61000"}}
    [event_] = transitions(None, stopped, "Shop/Receipts")
    assert event_.outcome is SENDING_STOPPED
    assert {k: event_.detail[k] for k in ("scope", "kind", "lane", "at")} == {
        "scope": "tenant/acme", "kind": "paused", "lane": "bulk", "at": 1000}
    probed = {**stopped, SesStopItem.PROBE_AT: {"N": "121000"}}
    assert transitions(stopped, probed, "Shop/Receipts") == []  # a probe refused again is no new event
    resumed = {**probed, SesStopItem.RESUMED_AT: {"N": "130000"}}
    [end] = transitions(probed, resumed, "Shop/Receipts")
    assert end.outcome is SENDING_RESUMED and end.detail["at"] == 130000
    assert transitions(probed, resumed, "Shop/Receipts")[0].detail["eventId"] == end.detail["eventId"]


def test_the_emulators_paused_account_is_waited_out_and_every_job_sent_once(pipeline, ses_faults, aws):
    jobs, clock = Jobs("account-paused"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    ses = boto3.client("sesv2")
    ses.put_account_sending_attributes(SendingEnabled=False)  # as SES does when it pauses an account
    keys = [f"receipt:a{n}:u1" for n in range(4)]
    for key in keys:
        jobs.enqueue(job(key))
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"] * 4
    ses.put_account_sending_attributes(SendingEnabled=True)  # the pause ends while the jobs are parked
    clock.advance(MINUTE_MS)
    assert sorted(line["outcome"] for line in deliver(consumer, jobs, clock)) == ["sent"] * 4
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert ses_faults.send_requests == 5 and pipeline.dead_letters() == []


def test_a_disabled_tenant_parks_only_its_own_jobs_while_the_others_send(pipeline, ses_faults, aws):
    jobs, clock = Jobs("tenant-paused"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock, ses_tenants=True)
    ses = boto3.client("sesv2")
    arn = ses.create_tenant(TenantName="acme")["TenantArn"]
    ses.create_tenant(TenantName="globex")
    ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", ReputationEntityReference=arn, SendingStatus="DISABLED")
    for n in range(3):
        jobs.enqueue(job(f"receipt:acme{n}:u1", tenant="acme"))
        jobs.enqueue(job(f"receipt:globex{n}:u1", tenant="globex"))
    lines = deliver(consumer, jobs, clock)
    by_tenant = {(line["tenant"], line["outcome"]) for line in lines}
    assert by_tenant == {("acme", "ses_stopped"), ("globex", "sent")}
    assert ses_faults.send_requests == 4  # acme's first job, and globex's three
    assert stop_item(pipeline, "tenant/acme")[SesStopItem.KIND]["S"] == "paused" and stop_item(pipeline) == {}
    counted = sqs_requests(consumer)
    assert [line["outcome"] for line in deliver(consumer, jobs, clock, batch_size=1)] == ["ses_stopped"]
    assert counted["ReceiveMessage"] == 0  # a tenant's stop takes no other job ahead of its turn

    ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", ReputationEntityReference=arn, SendingStatus="REINSTATED")
    clock.advance(MINUTE_MS)
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["sent"] * 3
    assert all(pipeline.emails_for(f"receipt:{t}{n}:u1") == 1 for t in ("acme", "globex") for n in range(3))
    assert [send["tenantName"] for send in aws.ses_sends()].count("acme") == 3


def test_sendonce_tenants_lists_each_tenants_status_as_ses_reports_it_and_the_lanes_stops(
        pipeline, ses_faults, capsys):
    from sendonce_ops.cli import main as sendonce

    ses = boto3.client("sesv2")
    arn = ses.create_tenant(TenantName="acme")["TenantArn"]
    ses.create_tenant(TenantName="globex")
    ses.update_reputation_entity_customer_managed_status(
        ReputationEntityType="RESOURCE", ReputationEntityReference=arn, SendingStatus="DISABLED")
    jobs, clock = Jobs("tenants-command"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock, ses_tenants=True)
    jobs.enqueue(job("receipt:t1:u1", tenant="acme"))
    deliver(consumer, jobs, clock)

    assert sendonce(["--table", pipeline.table_name, "tenants"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^acme\s+DISABLED\s+DISABLED\s+ENABLED\s+-\s+standard\s+account$", out, re.M)
    assert re.search(r"^globex\s+ENABLED\s+ENABLED\s+ENABLED\s+-\s+standard\s+account$", out, re.M)
    assert re.search(r"^jobs\s+tenant/acme\s+paused\s+.* UTC\s+stopped\s+SendingPausedException", out, re.M)
    assert sendonce(["--table", pipeline.table_name, "--json", "tenants"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [t["tenant"] for t in listed["tenants"]] == ["acme", "globex"]
    assert [(s["scope"], s["resumed_at_ms"]) for s in listed["stops"]] == [("tenant/acme", None)]


def test_a_stop_learned_while_dynamodb_throttles_the_lanes_record_still_parks_and_loses_nothing(
        pipeline, ses_faults, slow):
    from slow_aws import consumer as slow_consumer

    from sendonce_local.emulator.slow_services import Rule

    jobs, clock = Jobs("board-throttled"), FakeClock()
    consumer, log = slow_consumer(pipeline, slow, jobs, clock, sender_identity=SENDER_DOMAIN)
    consumer.redelivery.postponement_s = lambda outcome, postponements: 0
    keys = [f"receipt:b{n}:u1" for n in range(3)]
    for key in keys:
        jobs.enqueue(job(key))
    ses_faults.script(Fault.SENDING_PAUSED)
    slow.fault(Rule("dynamodb", "UpdateItem", "ProvisionedThroughputExceededException"))  # the stop item's writes
    records = jobs.receive()
    jobs.acknowledge(consumer.handle(event(*records), FakeContext(clock)), *records)
    slow.clear()
    outcomes = [json.loads(line)["outcome"] for line in log.getvalue().splitlines()]
    assert outcomes == ["ses_stopped"] * 3 and ses_faults.send_requests == 1  # learned all the same
    assert stop_item(pipeline) == {}  # the lane's record was not written: this instance keeps its own minute

    clock.advance(MINUTE_MS)
    while jobs.depth():
        batch = jobs.receive()
        jobs.acknowledge(consumer.handle(event(*batch), FakeContext(clock)), *batch)
    assert {key: pipeline.emails_for(key) for key in keys} == dict.fromkeys(keys, 1)
    assert pipeline.dead_letters() == []


UNVERIFIED = "Email address is not verified. The following identities failed the check in region US-EAST-1: "


@pytest.mark.parametrize(("code", "message", "sender", "stop"), [
    ("SendingPausedException", "The message can't be sent because the account's ability to send email is currently "
     "paused.", "shop@example.com", "paused"),
    ("AccountSuspendedException", "permanently restricted", "shop@example.com", "setup"),
    ("MessageRejected", UNVERIFIED + "shop@example.com", "shop@example.com", "setup"),
    ("MessageRejected", UNVERIFIED + "example.com", "shop@example.com", "setup"),
    ("MessageRejected", "Email address not verified Shop <shop@example.com>", "shop@example.com", "setup"),  # moto's
    # SES's sandbox refusing a recipient, even one of the sender's own domain: the job's.
    ("MessageRejected", UNVERIFIED + "customer@example.com", "shop@example.com", None),
    ("MessageRejected", UNVERIFIED + "customer@mail.example.com, x@notexample.com", "shop@example.com", None),
    ("MessageRejected", UNVERIFIED + "billing@other.example", "billing@other.example", None),  # outside the identity
    ("NotFoundException", "Configuration set receipts does not exist.", "shop@example.com", "setup"),
    ("NotFoundException", "Template receipt-v2 does not exist.", "shop@example.com", None),
    ("LimitExceededException", "Daily message quota exceeded.", "shop@example.com", "quota"),
    ("Throttling", "Daily message quota exceeded.", "shop@example.com", "quota"),
    ("TooManyRequestsException", "Maximum sending rate exceeded.", "shop@example.com", None),
], ids=lambda value: value if isinstance(value, str) and len(value) < 30 else None)
def test_a_refusal_is_the_lanes_stop_only_when_it_names_the_account_or_the_pipelines_setup(
        code, message, sender, stop):
    from sendonce_runtime.ses_sender import stop_of

    assert stop_of(code, message, sender, "example.com") == stop



def test_a_parked_job_keeps_its_first_queueing_time_through_a_wait_that_is_not_a_parking(pipeline, ses_faults):
    """Parked, then throttled when the lane asks SES again, then parked again: the job's retention clock runs from
    its first queueing through every copy, so it never waits longer in all than the queue keeps a message."""
    jobs, clock = Jobs("parked-throttled"), FakeClock()
    consumer, _ = stopped_consumer(pipeline, jobs, clock)
    jobs.enqueue(job("receipt:pt:u1"))
    ses_faults.script(Fault.SENDING_PAUSED)
    assert [line["outcome"] for line in deliver(consumer, jobs, clock)] == ["ses_stopped"]
    [parked] = jobs.receive()
    queued_at = parked["messageAttributes"][CopyAttribute.PARKED_SINCE]["stringValue"]
    clock.advance(MINUTE_MS)  # the lane's turn to ask SES again: the job asks, and SES throttles it
    ses_faults.script(Fault.THROTTLE, Fault.SENDING_PAUSED)
    jobs.acknowledge(consumer.handle(event(parked), FakeContext(clock)), parked)
    [throttled] = jobs.receive()
    assert throttled["messageAttributes"][CopyAttribute.PARKED_SINCE]["stringValue"] == queued_at
    clock.advance(MINUTE_MS)
    jobs.acknowledge(consumer.handle(event(throttled), FakeContext(clock)), throttled)
    [parked_again] = jobs.receive()
    assert parked_again["messageAttributes"][CopyAttribute.PARKED_SINCE]["stringValue"] == queued_at
