"""SES's own events settle every send a crash left undecided: exactly one email at every crash point.

Each case kills the worker (or breaks SES's answer) at one point, lets SES's events reach the recorder (played
as SES publishes them, see ``sendonce_local.emulator.ses_publisher``), then lets SQS redeliver until the key is
decided. Emails are counted in the emulator's SES. With every event delivered, the default policy sends each key
exactly once and leaves nothing for a person; with the events of a send lost, the residual is a double that the
recorder detects as soon as any later event of the first email arrives.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from crash_injection import CrashPoint, WorkerKilled, crash_at
from ses_fault_proxy import Fault
from slow_aws import Jobs
from slow_aws import consumer as slow_consumer

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import TimeBudget
from sendonce_contract.schema import METRIC_DIMENSION, METRIC_NAMESPACE, Metric
from sendonce_local.emulator.ses_publisher import SIMULATOR_DOMAIN, EventFaults
from sendonce_local.emulator.slow_services import Rule
from sendonce_ops.cli import main as sendonce
from sendonce_producer import cancel
from sendonce_runtime.outcome_log import OutcomeLog

VISIBILITY_TIMEOUT_MS = 6 * 30_000
GRACE_MS = 5 * 60_000
ALL = float("inf")
DEDUPE_TTL_S = 3_600
# SES's Send events at once; what became of each email (a delivery, a bounce, a complaint) an hour later.
LATE_OUTCOMES = EventFaults(delay_s=0, outcome_delay_s=3_600)
RESEND, NEVER = DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, DeliveryPolicy.NEVER_RESEND
# What breaks: a crash point, or SES's answer going wrong (the worker lives and reports an ambiguous send).
BREAKS = [*CrashPoint, Fault.ACCEPT_THEN_DROP, Fault.ACCEPT_THEN_HANG, Fault.SERVER_ERROR,
          Fault.ACCEPT_THEN_SERVER_ERROR]
# Emails SES accepted, and the final status, per policy, with every event delivered.
EXPECTED = {
    (RESEND, CrashPoint.AFTER_CLAIM): (1, "SENT"),  # no event for a send that never left: sent after the grace
    (NEVER, CrashPoint.AFTER_CLAIM): (0, "UNKNOWN"),  # ... or left for a person under never-resend
    (RESEND, Fault.SERVER_ERROR): (1, "SENT"),
    (NEVER, Fault.SERVER_ERROR): (0, "UNKNOWN"),
}

# Every guarantee here holds whether a batch's records run in turn or ten at once.
pytestmark = pytest.mark.usefixtures("at_both_parallelisms")


def break_once(pipeline, ses_faults, clock, policy, what, records, settings):
    consumer = pipeline.consumer(clock, delivery=policy, time_budget=TimeBudget(ses_read_timeout_s=0.5),
                                 **settings)
    if isinstance(what, CrashPoint):
        with pytest.raises(WorkerKilled):
            crash_at(consumer, what).handle(event(*records), FakeContext(clock))
        return
    ses_faults.script(*[what] * len(records))
    response = consumer.handle(event(*records), FakeContext(clock))
    assert failed_ids(response) == {r["messageId"] for r in records}  # ambiguous: the record stays in flight


def redeliver_until_decided(pipeline, clock, policy, records, settings) -> list[dict]:
    """SQS brings the messages back after the visibility timeout, then, for those waiting on SES's events, when
    the consumer asked (the end of the grace period)."""
    clock.advance(VISIBILITY_TIMEOUT_MS)
    responses = []
    for _ in range(3):
        response = pipeline.consumer(clock, delivery=policy, **settings).handle(event(*records), FakeContext(clock))
        responses.append(response)
        if not response["batchItemFailures"]:
            return responses
        clock.advance(GRACE_MS)
    raise AssertionError(f"not decided after three deliveries: {responses}")


@pytest.mark.parametrize("policy", [RESEND, NEVER], ids=lambda p: p.value)
@pytest.mark.parametrize("what", BREAKS, ids=lambda w: w.value)
def test_with_every_event_delivered_each_key_is_sent_exactly_once(pipeline, ses_faults, policy, what):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    ses_events = pipeline.ses_events(clock)
    record = sqs_record(job("reset:77:u9"))

    break_once(pipeline, ses_faults, clock, policy, what, [record], settings)
    ses_events.pump(ALL)  # SES's events for whatever it accepted reach the recorder
    redeliver_until_decided(pipeline, clock, policy, [record], settings)
    ses_events.pump(ALL)

    emails, status = EXPECTED.get((policy, what), (1, "SENT"))
    assert pipeline.emails_for("reset:77:u9") == emails
    assert pipeline.status("reset:77:u9") == status
    assert not any(line.get("DoubleSends") for line in pipeline.recorder_outcomes())


@pytest.mark.parametrize("policy", [RESEND, NEVER], ids=lambda p: p.value)
@pytest.mark.parametrize("point", [CrashPoint.AFTER_CLAIM, CrashPoint.AFTER_SES_ACCEPTED], ids=lambda v: v.value)
def test_a_worker_killed_with_ten_sends_in_flight_leaves_nothing_for_a_person(pipeline, ses_faults, policy, point):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS, parallelism=10)
    ses_events = pipeline.ses_events(clock)
    records = [sqs_record(job(f"batch:{n}")) for n in range(10)]

    break_once(pipeline, ses_faults, clock, policy, point, records, settings)
    ses_events.pump(ALL)
    redeliver_until_decided(pipeline, clock, policy, records, settings)

    for n in range(10):
        if policy is NEVER and point is CrashPoint.AFTER_CLAIM:
            assert (pipeline.emails_for(f"batch:{n}"), pipeline.status(f"batch:{n}")) == (0, "UNKNOWN")
        else:
            assert (pipeline.emails_for(f"batch:{n}"), pipeline.status(f"batch:{n}")) == (1, "SENT")


def test_the_consumer_waits_for_evidence_and_asks_to_come_back_when_the_grace_period_ends(pipeline):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    jobs = Jobs("evidence-wait")  # a real queue: the visibility asked for is SQS's call on the record's handle
    jobs.enqueue(job("k:wait"))
    [record] = jobs.receive()
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, **settings), CrashPoint.AFTER_CLAIM).handle(event(record),
                                                                                        FakeContext(clock))
    clock.advance(VISIBILITY_TIMEOUT_MS)
    consumer = pipeline.consumer(clock, queue_url=jobs.url, **settings)
    asked: list[int] = []  # the visibility the consumer asked SQS for, as it went out
    for operation in ("ChangeMessageVisibility", "ChangeMessageVisibilityBatch"):
        consumer.redelivery._client.meta.events.register(
            f"before-parameter-build.sqs.{operation}",
            lambda params, **_: asked.extend(e["VisibilityTimeout"] for e in params.get("Entries", [params])))
    response = consumer.handle(event(record), FakeContext(clock))
    assert failed_ids(response) == {record["messageId"]}
    lease_expired_ms_ago = VISIBILITY_TIMEOUT_MS - 30_000 - 10_000  # deadline (30 s) + lease margin (10 s)
    assert asked == [(GRACE_MS - lease_expired_ms_ago) // 1000]  # back when the grace period ends
    assert pipeline.emails_for("k:wait") == 0


@pytest.mark.parametrize("policy", [RESEND, NEVER], ids=lambda p: p.value)
def test_a_lost_send_event_inside_the_crash_window_is_the_residual_and_is_detected(pipeline, policy):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    # Every event of the first email is late (after the grace period): the worst case of best-effort delivery.
    ses_events = pipeline.ses_events(clock, EventFaults(delay_s=0, outcome_delay_s=0))
    record = sqs_record(job("k:residual"))
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, delivery=policy, **settings), CrashPoint.AFTER_SES_ACCEPTED).handle(
            event(record), FakeContext(clock))
    late = ses_events  # not pumped: nothing reached the recorder before the decision
    redeliver_until_decided(pipeline, clock, policy, [record], settings)
    late.pump(ALL)

    if policy is RESEND:
        assert pipeline.emails_for("k:residual") == 2
        doubles = [line for line in pipeline.recorder_outcomes() if line.get("outcome") == "double_send"]
        assert len(doubles) == 1 and len(doubles[0]["sesMessageIds"]) == 2
        assert pipeline.status("k:residual") == "SENT"
    else:
        assert pipeline.emails_for("k:residual") == 1
        assert pipeline.status("k:residual") == "SENT"  # UNKNOWN until the late event settled it


def test_a_configuration_set_override_is_refused_while_events_are_the_evidence(pipeline):
    consumer = pipeline.consumer(**pipeline.evidence_settings())
    response = consumer.handle(event(sqs_record(job("k:set", configurationSet="marketing"))),
                               FakeContext(FakeClock()))
    assert response == {"batchItemFailures": []}
    [dead] = pipeline.dead_letters()
    assert "configurationSet 'marketing' is refused" in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert pipeline.emails_for("k:set") == 0


def ses_ids(pipeline, key: str) -> list[str]:
    """The SES message ids of the emails the emulator's SES accepted for ``key``, in order."""
    return [m.id for m in pipeline.aws.sent_emails() if getattr(m, "subject", "") == f"Receipt {key}"]


def outcomes_of(log: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in log.getvalue().splitlines()]


@pytest.mark.parametrize("late", ["bounce", "complaint"])
def test_a_late_event_of_a_forgotten_keys_first_email_never_settles_the_keys_next_lifetime(pipeline, ses_faults,
                                                                                           late):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS, dedupe_ttl_s=DEDUPE_TTL_S)
    ses_events = pipeline.ses_events(clock, LATE_OUTCOMES)
    key = f"k:reused:{late}"
    body = job(key, to=[f"{late}@{SIMULATOR_DOMAIN}"])
    assert pipeline.consumer(clock, **settings).handle(event(sqs_record(body)), FakeContext(clock)) == {
        "batchItemFailures": []}
    ses_events.pump()  # the first email's Send event; its bounce or complaint is still to come
    clock.advance(DEDUPE_TTL_S * 1000 + 1_000)  # the key is forgotten

    # The job is enqueued again: claimed anew and, while its worker waits for SES (which throttles it), the first
    # email's late bounce or complaint reaches the recorder.
    ses_faults.script(Fault.THROTTLE)
    ses_faults.meanwhile(lambda: ses_events.pump(ALL))
    consumer = pipeline.consumer(clock, **settings)
    consumer.log = OutcomeLog(log := io.StringIO())
    consumer.handle(event(sqs_record(body)), FakeContext(clock))
    assert [line["outcome"] for line in outcomes_of(log)] == ["throttled"]
    # Its next delivery sends it: the first email was the key's earlier lifetime's, not this one's.
    consumer.handle(event(sqs_record(body)), FakeContext(clock))
    assert [line["outcome"] for line in outcomes_of(log)] == ["throttled", "sent"]
    ses_events.pump(ALL)

    emails = ses_ids(pipeline, key)
    assert len(emails) == 2, emails  # one per lifetime of the key
    first, second = emails
    item = pipeline.ledger_item(key)
    assert item["status"]["S"] == "SENT" and item["sesMessageId"]["S"] == second
    assert item["sesMessageIds"]["SS"] == [second]  # the first email's events stayed with its own lifetime
    recorded = pipeline.recorder_outcomes()
    assert not any(line.get("DoubleSends") for line in recorded)
    earlier = [line for line in recorded if line["outcome"] == "earlier_lifetime"]
    assert earlier and {line["sesMessageId"] for line in earlier} == {first}


def test_a_late_event_of_a_forgotten_keys_email_leaves_the_keys_cancel_cancelled(pipeline):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    ses_events = pipeline.ses_events(clock, LATE_OUTCOMES)
    key = "k:reused:cancelled"
    body = job(key, to=[f"bounce@{SIMULATOR_DOMAIN}"])
    pipeline.consumer(clock, **settings).handle(event(sqs_record(body)), FakeContext(clock))
    ses_events.pump()
    # The record past its dedupe_ttl (DynamoDB's TTL deletes it late), then the application cancels the key.
    boto3.client("dynamodb").update_item(TableName=pipeline.table_name, Key={"dedupeKey": {"S": key}},
                                         UpdateExpression="SET expiresAt = :past",
                                         ExpressionAttributeValues={":past": {"N": "1"}})
    assert cancel(pipeline.table_name, key).cancelled

    ses_events.pump(ALL)  # the first email's bounce, late
    assert pipeline.status(key) == "CANCELLED"
    assert pipeline.recorder_outcomes()[-1]["outcome"] == "earlier_lifetime"
    consumer = pipeline.consumer(clock, **settings)
    consumer.log = OutcomeLog(log := io.StringIO())
    consumer.handle(event(sqs_record(body)), FakeContext(clock))
    assert [line["outcome"] for line in outcomes_of(log)] == ["cancelled"]
    assert pipeline.emails_for(key) == 1


def test_a_late_event_of_a_forgotten_keys_email_leaves_the_keys_expired_record_expired(pipeline):
    """As a cancel's tombstone: the key's next job met after its expiresAt is recorded EXPIRED, and the first
    email's late bounce never turns that record SENT."""
    from sendonce_contract.message import CONTRACT_VERSION

    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    ses_events = pipeline.ses_events(clock, LATE_OUTCOMES)
    key = "k:reused:expired"
    pipeline.consumer(clock, **settings).handle(
        event(sqs_record(job(key, to=[f"bounce@{SIMULATOR_DOMAIN}"]))), FakeContext(clock))
    ses_events.pump()
    boto3.client("dynamodb").update_item(TableName=pipeline.table_name, Key={"dedupeKey": {"S": key}},
                                         UpdateExpression="SET expiresAt = :past",
                                         ExpressionAttributeValues={":past": {"N": "1"}})
    clock.advance(60_000)
    stale = job(key, to=[f"bounce@{SIMULATOR_DOMAIN}"], contractVersion=CONTRACT_VERSION,
                expiresAt=datetime.fromtimestamp((clock.now_ms() - 30_000) / 1000, UTC).isoformat())
    consumer = pipeline.consumer(clock, **settings)
    consumer.log = OutcomeLog(log := io.StringIO())
    consumer.handle(event(sqs_record(stale)), FakeContext(clock))
    assert [line["outcome"] for line in outcomes_of(log)] == ["expired"]
    ses_events.pump(ALL)  # the first email's bounce, late
    assert pipeline.status(key) == "EXPIRED"
    assert pipeline.recorder_outcomes()[-1]["outcome"] == "earlier_lifetime"
    assert pipeline.emails_for(key) == 1


def test_a_first_emails_event_before_the_takeovers_completion_is_a_double_counted_once(pipeline, ses_faults, capsys):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    ses_events = pipeline.ses_events(clock)
    key = "k:overwritten"
    record = sqs_record(job(key))
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, **settings), CrashPoint.AFTER_SES_ACCEPTED).handle(event(record),
                                                                                           FakeContext(clock))
    clock.advance(VISIBILITY_TIMEOUT_MS + GRACE_MS)  # the dead worker's lease and the grace period pass, no event

    # A takeover resends; the first email's events reach the recorder while it waits for SES's answer, so they
    # find the record IN_FLIGHT under the takeover, before its SENT record is written. The resend's are lost.
    ses_faults.meanwhile(lambda: ses_events.pump(ALL))
    takeover = pipeline.consumer(clock, **settings)
    takeover.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    assert takeover.handle(event(record), FakeContext(clock)) == {"batchItemFailures": []}
    first, second = ses_ids(pipeline, key)

    [line] = outcomes_of(log)
    assert line["outcome"] == "sent" and line["sesMessageId"] == second
    assert line.get(Metric.DOUBLE_SENDS) == 1 and line["level"] == "ERROR"
    # The metric the DoubleSends alarm reads: namespace sendonce, dimension Pipeline.
    [document] = line["_aws"]["CloudWatchMetrics"]
    assert document["Namespace"] == METRIC_NAMESPACE and [METRIC_DIMENSION] in document["Dimensions"]
    assert {"Name": Metric.DOUBLE_SENDS, "Unit": "Count"} in document["Metrics"]
    assert not any(line.get(Metric.DOUBLE_SENDS) for line in pipeline.recorder_outcomes())
    assert sendonce(["--json", "--table", pipeline.table_name, "doubles"]) == 0
    [double] = json.loads(capsys.readouterr().out)
    assert double["key"] == key and double["every_ses_message_id"] == sorted([first, second])
    # Once: the resend's own events, should they come after all, count no second double.
    ses_events.pump(ALL)
    assert not any(line.get(Metric.DOUBLE_SENDS) for line in pipeline.recorder_outcomes())


def test_a_double_met_by_a_carried_completion_is_counted_by_the_copy_that_writes_it(pipeline, ses_faults, slow, jobs):
    clock = FakeClock()
    settings = pipeline.evidence_settings(grace_ms=GRACE_MS)
    ses_events = pipeline.ses_events(clock)
    key = "k:carried-double"
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, **settings), CrashPoint.AFTER_SES_ACCEPTED).handle(
            event(sqs_record(job(key))), FakeContext(clock))
    clock.advance(VISIBILITY_TIMEOUT_MS + GRACE_MS)

    # The takeover resends while the first email's events arrive, and DynamoDB then refuses its completion: the
    # job's copy carries it, and writes it onto a record that holds the first email's id.
    def meanwhile() -> None:
        ses_events.pump(ALL)
        slow.fault(Rule("dynamodb", "UpdateItem", "ProvisionedThroughputExceededException"))

    ses_faults.meanwhile(meanwhile)
    jobs.enqueue(job(key))
    [original] = jobs.receive()
    takeover, log = slow_consumer(pipeline, slow, jobs, clock, **settings)
    jobs.acknowledge(takeover.handle(event(original), FakeContext(clock)), original)
    assert [line["outcome"] for line in outcomes_of(log)] == ["sent_unrecorded"]
    slow.clear()
    [copy] = jobs.receive()
    jobs.acknowledge(takeover.handle(event(copy), FakeContext(clock)), copy)

    line = outcomes_of(log)[-1]
    assert line["outcome"] == "duplicate" and line.get(Metric.DOUBLE_SENDS) == 1 and line["doubleSend"] is True
    assert len(ses_ids(pipeline, key)) == 2 and pipeline.status(key) == "SENT"
    assert not any(line.get(Metric.DOUBLE_SENDS) for line in pipeline.recorder_outcomes())
