"""SES's own events settle every send a crash left undecided: exactly one email at every crash point.

Each case kills the worker (or breaks SES's answer) at one point, lets SES's events reach the recorder (played
as SES publishes them, see ``sendonce_local.emulator.ses_publisher``), then lets SQS redeliver until the key is
decided. Emails are counted in the emulator's SES. With every event delivered, the default policy sends each key
exactly once and leaves nothing for a person; with the events of a send lost, the residual is a double that the
recorder detects as soon as any later event of the first email arrives.
"""

from __future__ import annotations

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from crash_injection import CrashPoint, WorkerKilled, crash_at
from ses_fault_proxy import Fault

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import TimeBudget
from sendonce_local.emulator.ses_publisher import EventFaults

VISIBILITY_TIMEOUT_MS = 6 * 30_000
GRACE_MS = 5 * 60_000
ALL = float("inf")
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
    record = sqs_record(job("k:wait"))
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, **settings), CrashPoint.AFTER_CLAIM).handle(event(record),
                                                                                        FakeContext(clock))
    clock.advance(VISIBILITY_TIMEOUT_MS)
    consumer = pipeline.consumer(clock, **settings)
    results = []
    settle = consumer.redelivery.settle
    consumer.redelivery.settle = lambda record, result, deadline=None: (results.append(result)
                                                                        or settle(record, result, deadline))
    response = consumer.handle(event(record), FakeContext(clock))
    assert failed_ids(response) == {record["messageId"]}
    [result] = results
    lease_expired_ms_ago = VISIBILITY_TIMEOUT_MS - 30_000 - 10_000  # deadline (30 s) + lease margin (10 s)
    assert result.outcome.value == "awaiting_evidence"
    assert result.retry_after_s == (GRACE_MS - lease_expired_ms_ago) // 1000
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
