"""sendAt: nothing is claimed before the job's time; it waits as delayed copies, spends no receive, and can be
cancelled until then."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, create_pipeline, event, job, run_at_once, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_contract.message import InvalidMessage, parse_job
from sendonce_producer import EmailJob, cancel
from sendonce_runtime.outcome_log import OutcomeLog

HOUR_MS = 3_600_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


@pytest.fixture
def jobs(aws, pipeline) -> str:
    return boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]


def consumer(pipeline, jobs, clock, **overrides):
    consumer = pipeline.consumer(clock, queue_url=jobs, max_receive_count=5, **overrides)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts")
    consumer.sent = []  # each delayed copy as the consumer asked SQS for it (a batch of one, or a batch's entry)
    consumer.redelivery._client.meta.events.register(
        "before-parameter-build.sqs.SendMessageBatch", lambda params, **_: consumer.sent.extend(params["Entries"]))
    return consumer, log


def test_send_at_is_an_rfc3339_time_with_its_offset_and_is_not_content():
    base = job("k:at")
    at = parse_job(json.dumps({**base, "sendAt": "2026-12-24T09:00:00+01:00"}), "m")
    assert at.send_at_ms == int(datetime(2026, 12, 24, 8, tzinfo=UTC).timestamp() * 1000)
    assert at.payload_hash == parse_job(json.dumps(base), "m").payload_hash
    for bad, why in (("2026-12-24T09:00:00", "offset"), ("2026-12-24", "offset"), ("tomorrow", "RFC 3339"),
                     (1766563200, "string")):
        with pytest.raises(InvalidMessage, match=why):
            parse_job(json.dumps({**base, "sendAt": bad}), "m")
    made = EmailJob(dedupe_key="k:at", sender="shop@example.com", to=["ada@example.org"], subject="s", text="t",
                    send_at=datetime(2026, 12, 24, 8, tzinfo=UTC))
    assert json.loads(made.to_message())["sendAt"] == "2026-12-24T08:00:00+00:00"
    # sendAt came with contract version 2: a consumer of version 1 puts such a job back instead of dead-lettering it
    assert json.loads(made.to_message())["contractVersion"] == 2


def test_a_job_waits_for_its_send_at_as_delayed_copies_without_a_claim_or_a_receive_spent(pipeline, jobs):
    clock = FakeClock()
    body = job("k:later", sendAt=iso(clock.now_ms() + HOUR_MS))
    early, log = consumer(pipeline, jobs, clock)
    assert early.handle(event(sqs_record(body, receive_count=1)), FakeContext(clock)) == {"batchItemFailures": []}
    [copy] = early.sent
    assert copy["DelaySeconds"] == 900 and json.loads(copy["MessageBody"]) == body
    assert pipeline.ledger_item("k:later") is None and pipeline.emails_for("k:later") == 0
    line = json.loads(log.getvalue().splitlines()[-1])
    assert line["outcome"] == "scheduled" and line["Scheduled"] == 1

    clock.advance(HOUR_MS - 10_000)  # the last copy waits only for the time left
    almost, _ = consumer(pipeline, jobs, clock)
    almost.handle(event(sqs_record(body, receive_count=5)), FakeContext(clock))  # even on the queue's last receive
    assert [c["DelaySeconds"] for c in almost.sent] == [10]
    assert not pipeline.dead_letters()

    clock.advance(10_000)
    due, _ = consumer(pipeline, jobs, clock)
    due.handle(event(sqs_record(body)), FakeContext(clock))
    assert pipeline.emails_for("k:later") == 1 and not due.sent


def test_a_scheduled_key_can_be_cancelled_until_it_is_due(pipeline, jobs):
    clock = FakeClock()
    body = job("k:cancel-later", sendAt=iso(clock.now_ms() + HOUR_MS))
    consumer(pipeline, jobs, clock)[0].handle(event(sqs_record(body)), FakeContext(clock))
    assert cancel(pipeline.table_name, "k:cancel-later").cancelled
    clock.advance(HOUR_MS)
    due, log = consumer(pipeline, jobs, clock)
    due.handle(event(sqs_record(body)), FakeContext(clock))
    assert json.loads(log.getvalue().splitlines()[-1])["outcome"] == "cancelled"
    assert pipeline.emails_for("k:cancel-later") == 0


def test_a_send_at_beyond_dedupe_ttl_is_dead_lettered_with_the_reason(pipeline, jobs):
    clock = FakeClock()
    body = job("k:too-far", sendAt=iso(clock.now_ms() + 8 * 24 * HOUR_MS))
    consumer(pipeline, jobs, clock)[0].handle(event(sqs_record(body)), FakeContext(clock))
    [dead] = pipeline.dead_letters()
    attributes = dead["MessageAttributes"]
    assert attributes["sendonce.reasonCode"]["StringValue"] == "invalid-message"
    assert "at most 7 days ahead (its dedupe_ttl" in attributes["sendonce.reason"]["StringValue"]


def test_a_time_in_the_past_sends_now(pipeline, jobs):
    clock = FakeClock()
    body = job("k:past", sendAt=iso(clock.now_ms() - HOUR_MS))
    consumer(pipeline, jobs, clock)[0].handle(event(sqs_record(body)), FakeContext(clock))
    assert pipeline.emails_for("k:past") == 1


def test_send_at_on_a_fifo_queue_is_refused_with_the_reason(aws):
    from sendonce_contract.schema import DeadLetter

    fifo = create_pipeline(aws, fifo=True)
    clock = FakeClock()
    # Due or not when a worker takes it: the same job has one outcome, whatever the timing of its deliveries.
    later = job("k:fifo-later", sendAt=iso(clock.now_ms() + HOUR_MS))
    past = job("k:fifo-past", sendAt=iso(clock.now_ms() - HOUR_MS))
    fifo.consumer(clock, fifo=True).handle(event(sqs_record(later, group="ada"), sqs_record(past, group="bob")),
                                           FakeContext(clock))
    dead = fifo.dead_letters()
    assert len(dead) == 2
    assert all("sendAt is refused on a FIFO queue" in d["MessageAttributes"][DeadLetter.REASON]["StringValue"]
               for d in dead)
    assert fifo.emails_for("k:fifo-later") == fifo.emails_for("k:fifo-past") == 0


@given(before=st.integers(0, 3), after=st.integers(1, 3), cancel_at=st.one_of(st.none(), st.integers(0, 6)))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_copies_of_a_scheduled_job_racing_a_cancel_send_once_or_never(pipeline, jobs, before, after, cancel_at):
    """Copies delivered at once before and after the job is due, with or without a cancel among them: one email
    if no cancel succeeded, none if one did."""
    key = f"k:race-later:{uuid.uuid4().hex[:8]}"
    now = FakeClock().now_ms()
    body = job(key, sendAt=iso(now + HOUR_MS))
    outcomes: list = []

    def deliver(at_ms: int):
        clock = FakeClock()
        clock.now = at_ms
        return lambda: consumer(pipeline, jobs, clock)[0].handle(event(sqs_record(body)), FakeContext(clock))

    phases = [[deliver(now) for _ in range(before)], [deliver(now + HOUR_MS) for _ in range(after)]]
    steps = phases[0] + phases[1]
    if cancel_at is not None:
        steps.insert(min(cancel_at, len(steps)), lambda: outcomes.append(cancel(pipeline.table_name, key)))
    run_at_once(steps)
    deliver(now + HOUR_MS)()  # SQS brings back whatever a live lease held off
    cancelled = bool(outcomes) and outcomes[0].cancelled
    assert pipeline.emails_for(key) == (0 if cancelled else 1)
