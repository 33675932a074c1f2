"""Expiry (``expiresAt``): a job met after it is acknowledged unsent and its key recorded ``EXPIRED``, so no copy or
redrive of it is sent while the ledger remembers the key; a key whose record stands is settled by that record; a
job that cannot be sent before it expires, or whose time has no offset, is refused with the reason. Emails are
counted in the emulator's SES."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract import outcome_events
from sendonce_contract.message import CONTRACT_VERSION, VERSION_FIELD
from sendonce_contract.schema import Status
from sendonce_producer import EmailJob, InvalidJob, cancel, status
from sendonce_runtime.outcome_log import OutcomeLog

MINUTE_MS = 60_000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def code(key: str, expires_at_ms: int, **fields) -> dict:
    """A one-time code's job, not to be sent after ``expires_at_ms``."""
    return job(key, expiresAt=iso(expires_at_ms), contractVersion=CONTRACT_VERSION, **fields)


def deliver(consumer, body: dict, clock: FakeClock) -> dict:
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    response = consumer.handle(event(sqs_record(body)), FakeContext(clock))
    [line] = [json.loads(text) for text in log.getvalue().splitlines() if '"outcome"' in text]
    line["redelivered"] = bool(failed_ids(response))
    return line


def test_a_job_met_before_its_expiry_is_sent(pipeline):
    clock = FakeClock()
    line = deliver(pipeline.consumer(clock), code("otp:e1:u1", clock.now + 10 * MINUTE_MS), clock)
    assert line["outcome"] == "sent" and pipeline.emails_for("otp:e1:u1") == 1


def test_a_job_met_after_its_expiry_is_acknowledged_unsent_and_no_copy_or_redrive_of_it_is_sent(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    body = code("otp:e2:u1", clock.now + 10 * MINUTE_MS)
    clock.advance(11 * MINUTE_MS)  # a backlog held it past its ten minutes
    line = deliver(consumer, body, clock)
    assert line["outcome"] == "expired" and line["Expired"] == 1 and not line["redelivered"]
    assert "met 60 s after its expiresAt: not sent, its key recorded EXPIRED" in line["reason"]
    record = status(pipeline.table_name, "otp:e2:u1")
    assert record is not None and record.state is Status.EXPIRED
    for _ in range(2):  # a copy, then a redrive of it from the DLQ: the record decides
        again = deliver(consumer, body, clock)
        assert again["outcome"] == "expired" and "already EXPIRED" in again["reason"]
    assert pipeline.emails_for("otp:e2:u1") == 0
    # An EXPIRED record is an outcome event of its own, with the time the worker met the job.
    [published] = outcome_events.transitions(None, pipeline.ledger_item("otp:e2:u1"), "Test/Receipts")
    assert published.outcome is outcome_events.EXPIRED and published.detail["at"] == clock.now


def test_a_throttled_job_that_expires_while_it_waits_is_not_sent_when_it_comes_back(pipeline, ses_faults):
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    body = code("otp:e3:u1", clock.now + MINUTE_MS)
    ses_faults.script(Fault.THROTTLE)
    assert deliver(consumer, body, clock)["outcome"] == "throttled"
    clock.advance(2 * MINUTE_MS)
    assert deliver(consumer, body, clock)["outcome"] == "expired"
    assert pipeline.emails_for("otp:e3:u1") == 0 and ses_faults.send_requests == 1


def test_an_expired_copy_of_a_key_already_sent_or_cancelled_is_settled_by_its_record(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    sent = code("otp:e4:u1", clock.now + MINUTE_MS)
    assert deliver(consumer, sent, clock)["outcome"] == "sent"
    assert cancel(pipeline.table_name, "otp:e5:u1").cancelled
    clock.advance(2 * MINUTE_MS)
    assert deliver(consumer, sent, clock)["outcome"] == "duplicate"
    assert deliver(consumer, code("otp:e5:u1", clock.now - MINUTE_MS), clock)["outcome"] == "cancelled"
    assert status(pipeline.table_name, "otp:e4:u1").state is Status.SENT
    assert status(pipeline.table_name, "otp:e5:u1").state is Status.CANCELLED
    assert pipeline.emails_for("otp:e4:u1") == 1 and pipeline.emails_for("otp:e5:u1") == 0


def test_an_expired_copy_of_a_key_another_worker_holds_is_acknowledged_and_leaves_its_record(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    consumer.processor._ledger.claim("otp:e6:u1", "worker", clock.now + MINUTE_MS, "hash")
    line = deliver(consumer, code("otp:e6:u1", clock.now - 1_000), clock)
    assert line["outcome"] == "expired" and "another delivery of it holds the key" in line["reason"]
    assert status(pipeline.table_name, "otp:e6:u1").state is Status.IN_FLIGHT
    assert pipeline.emails_for("otp:e6:u1") == 0


@pytest.mark.parametrize(("fields", "reason"), [
    ({"expiresAt": "2026-12-24T09:00:00"}, "expiresAt '2026-12-24T09:00:00' needs a date, a time and an offset"),
    ({"expiresAt": 1766566800}, "expiresAt must be an RFC 3339 time string"),
    ({"expiresAt": "soon"}, "expiresAt 'soon' is not an RFC 3339 time"),
    ({"expiresAt": "2026-12-24T09:00:00Z", "sendAt": "2026-12-24T10:00:00Z"},
     "sendAt 2026-12-24T10:00:00Z is after expiresAt 2026-12-24T09:00:00Z: the job could never be sent"),
], ids=["no offset", "a number", "not a time", "sendAt after it"])
def test_a_job_whose_expiry_is_not_a_time_or_comes_before_its_sendat_is_refused_with_the_reason(
        pipeline, fields, reason):
    body = job("otp:bad:u1", contractVersion=CONTRACT_VERSION, **fields)
    line = deliver(pipeline.consumer(FakeClock()), body, FakeClock())
    assert line["outcome"] == "invalid_message" and reason in line["reason"]
    [dead] = pipeline.dead_letters()
    assert reason in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert pipeline.emails_for("otp:bad:u1") == 0
    with pytest.raises(InvalidJob, match="needs a date, a time and an offset"):
        EmailJob(dedupe_key="otp:bad:u2", sender="shop@example.com", to=["ada@example.org"], subject="Code",
                 text="123", expires_at=datetime(2026, 12, 24, 9))
    with pytest.raises(InvalidJob, match="is after expiresAt"):
        EmailJob(dedupe_key="otp:bad:u3", sender="shop@example.com", to=["ada@example.org"], subject="Code",
                 text="123", expires_at=datetime(2026, 12, 24, 9, tzinfo=UTC),
                 send_at=datetime(2026, 12, 24, 10, tzinfo=UTC))


def test_the_producer_writes_expires_at_with_the_contract_version_that_carries_it():
    moment = datetime(2026, 12, 24, 9, tzinfo=UTC)
    document = EmailJob(dedupe_key="otp:e7:u1", sender="shop@example.com", to=["ada@example.org"], subject="Code",
                        text="123", expires_at=moment).to_document()
    assert document["expiresAt"] == moment.isoformat() and document[VERSION_FIELD] == 4
    later = EmailJob(dedupe_key="otp:e7:u1", sender="shop@example.com", to=["ada@example.org"], subject="Code",
                     text="123", expires_at=moment + timedelta(hours=1))
    # Not content: the same email whatever its expiry, so a copy with another expiresAt is a duplicate, not a conflict.
    from sendonce_contract.message import parse_job

    assert (parse_job(later.to_message(), "m").payload_hash
            == parse_job(EmailJob(dedupe_key="otp:e7:u1", sender="shop@example.com", to=["ada@example.org"],
                                  subject="Code", text="123").to_message(), "m").payload_hash)
