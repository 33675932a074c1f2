"""Expiry (``expiresAt``): a job met after it is acknowledged unsent and its key recorded ``EXPIRED``, so no copy or
redrive of it is sent while the ledger remembers the key; a key whose record stands is settled by that record; a
job that cannot be sent before it expires, or whose time has no offset, is refused with the reason. Emails are
counted in the emulator's SES."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract import outcome_events
from sendonce_contract.message import CONTRACT_VERSION, VERSION_FIELD
from sendonce_contract.schema import DeadLetter, Status
from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record
from sendonce_ops.cli import main as sendonce
from sendonce_producer import EmailJob, InvalidJob, cancel, status
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.send_rate import PaceSends, TokenBucket

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


def test_a_paced_job_whose_turn_comes_after_its_expiry_is_handed_back_not_sent_then_expires(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, parallelism=1, max_send_rate=0.5)
    [pace] = [check for check in consumer.processor.checks if isinstance(check, PaceSends)]
    pace._sleep = lambda _seconds: None  # the wait for a token is not slept here: it is judged
    pace.pace = TokenBucket(0.5, monotonic=lambda: 0.0)  # one token every 2 s, on a stopped clock
    first, late = code("otp:e7:u1", clock.now + MINUTE_MS), code("otp:e8:u1", clock.now + 1_000)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    # The second code's token comes 2 s on, its expiry 1 s on: the invocation has the time, the code does not.
    response = consumer.handle(event(sqs_record(first), record := sqs_record(late)), FakeContext(clock))
    assert failed_ids(response) == {record["messageId"]}
    outcomes = [json.loads(text)["outcome"] for text in log.getvalue().splitlines() if '"outcome"' in text]
    assert outcomes == ["sent", "paced"]
    clock.advance(2_000)  # it comes back at its turn
    assert deliver(consumer, late, clock)["outcome"] == "expired"
    assert pipeline.emails_for("otp:e7:u1") == 1 and pipeline.emails_for("otp:e8:u1") == 0


def test_a_redriven_job_met_after_its_expiry_is_not_sent(pipeline, ses_faults):
    """Refused by SES into the DLQ, fixed and redriven by ``sendonce dlq redrive`` after its expiry: the redrive
    delivers it, and it is acknowledged unsent."""
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    body = code("otp:e9:u1", clock.now + 10 * MINUTE_MS)
    ses_faults.script(Fault.REJECT)
    assert deliver(consumer, body, clock)["outcome"] == "refused"
    [dead] = pipeline.dead_letters()
    boto3.client("sqs").change_message_visibility(QueueUrl=pipeline.dead_letter_queue_url,
                                                  ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0)
    jobs = boto3.client("sqs").create_queue(QueueName="expiring-jobs")["QueueUrl"]
    assert sendonce(["--queue", jobs, "--dlq", pipeline.dead_letter_queue_url, "--dedupe-ttl", "604800", "dlq",
                     "redrive"]) == 0
    [moved] = boto3.client("sqs").receive_message(QueueUrl=jobs, MessageAttributeNames=["All"],
                                                  MessageSystemAttributeNames=["All"])["Messages"]
    clock.advance(11 * MINUTE_MS)  # the redrive came after the code's ten minutes
    source = EventSourceSpec(queue_url=jobs, queue_arn="arn:aws:sqs:us-east-1:123456789012:expiring-jobs")
    assert deliver_record(consumer, lambda_record(moved, source, "us-east-1"), clock)["outcome"] == "expired"
    assert status(pipeline.table_name, "otp:e9:u1").state is Status.EXPIRED
    assert pipeline.emails_for("otp:e9:u1") == 0 and ses_faults.send_requests == 1


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


# -- a lane's age limit (max_job_age) ------------------------------------------------------------------------------

def queued(body: dict, sent_at_ms: int, **attributes: str) -> dict:
    """The job's SQS record as Lambda hands it: SQS's SentTimestamp, and the attributes a copy carries."""
    record = sqs_record(body)
    record["attributes"]["SentTimestamp"] = str(sent_at_ms)
    record["messageAttributes"] = {name: {"dataType": "Number", "stringValue": value}
                                   for name, value in attributes.items()}
    return record


def deliver_record(consumer, record: dict, clock: FakeClock) -> dict:
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    consumer.handle(event(record), FakeContext(clock))
    [line] = [json.loads(text) for text in log.getvalue().splitlines() if '"outcome"' in text]
    return line


def test_a_lanes_age_limit_expires_a_job_without_expires_at_counted_from_its_first_queueing(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, max_job_age_s=600)
    fresh = deliver_record(consumer, queued(job("otp:a1:u1"), clock.now - 9 * MINUTE_MS), clock)
    assert fresh["outcome"] == "sent"
    stale = deliver_record(consumer, queued(job("otp:a2:u1"), clock.now - 11 * MINUTE_MS), clock)
    assert stale["outcome"] == "expired"
    assert "met 60 s after its lane's age limit (max_job_age, 600 s" in stale["reason"]
    assert status(pipeline.table_name, "otp:a2:u1").state is Status.EXPIRED
    # A delayed copy is a new message: its SentTimestamp is fresh, and the first queueing it carries decides.
    copy = queued(job("otp:a3:u1"), clock.now, **{DeadLetter.FIRST_QUEUED_AT: str(clock.now - 11 * MINUTE_MS)})
    assert deliver_record(consumer, copy, clock)["outcome"] == "expired"
    # The job's own expiresAt wins over its lane's limit, later or sooner.
    own = queued(code("otp:a4:u1", clock.now + MINUTE_MS), clock.now - 11 * MINUTE_MS)
    assert deliver_record(consumer, own, clock)["outcome"] == "sent"
    assert [pipeline.emails_for(f"otp:a{n}:u1") for n in (1, 2, 3, 4)] == [1, 0, 0, 1]


def test_a_throttled_jobs_copy_carries_its_first_queueing_so_the_age_limit_still_counts_from_it(pipeline, ses_faults):
    jobs = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    clock = FakeClock()
    consumer = pipeline.consumer(clock, max_job_age_s=600, queue_url=jobs, max_receive_count=5)
    first_queued = clock.now - 9 * MINUTE_MS
    ses_faults.script(Fault.THROTTLE)
    assert deliver_record(consumer, queued(job("otp:a5:u1"), first_queued), clock)["outcome"] == "throttled"
    [copy] = boto3.client("sqs").receive_message(QueueUrl=jobs, MessageAttributeNames=["All"], WaitTimeSeconds=5,
                                                 MessageSystemAttributeNames=["All"])["Messages"]
    assert copy["MessageAttributes"][DeadLetter.FIRST_QUEUED_AT]["StringValue"] == str(first_queued)
    clock.advance(2 * MINUTE_MS)  # its copy comes back past the limit
    source = EventSourceSpec(queue_url=jobs, queue_arn="arn:aws:sqs:us-east-1:123456789012:jobs")
    assert deliver_record(consumer, lambda_record(copy, source, "us-east-1"), clock)["outcome"] == "expired"
    assert pipeline.emails_for("otp:a5:u1") == 0


def test_a_dead_letter_keeps_the_first_queueing_and_a_redrive_sends_it_back_with_it(pipeline, capsys):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, max_job_age_s=600)
    first_queued = clock.now - 2 * MINUTE_MS
    line = deliver_record(consumer, queued(job("otp:a6:u1", to=["not an address"]), first_queued), clock)
    assert line["outcome"] == "invalid_message"
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"][DeadLetter.FIRST_QUEUED_AT]["StringValue"] == str(first_queued)
    boto3.client("sqs").change_message_visibility(QueueUrl=pipeline.dead_letter_queue_url,
                                                  ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0)
    jobs = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    assert sendonce(["--queue", jobs, "--dlq", pipeline.dead_letter_queue_url, "--dedupe-ttl", "604800", "dlq",
                     "redrive"]) == 0
    [moved] = boto3.client("sqs").receive_message(QueueUrl=jobs, MessageAttributeNames=["All"])["Messages"]
    assert moved["MessageAttributes"][DeadLetter.FIRST_QUEUED_AT]["StringValue"] == str(first_queued)
    assert DeadLetter.REASON not in moved["MessageAttributes"]


def test_each_lane_gets_its_own_age_limit():
    import aws_cdk as cdk
    from construct_support import build, pipeline_resources

    from sendonce_contract.deploy_config import Env

    _, template = build(urgent_lane=True, send_rate=10, max_concurrency=5, max_job_age=cdk.Duration.hours(6),
                        urgent_max_job_age=cdk.Duration.minutes(10))
    ages = {}
    for function in pipeline_resources(template, "AWS::Lambda::Function").values():
        env = function["Properties"].get("Environment", {}).get("Variables", {})
        if Env.LANE in env:
            ages[env[Env.LANE]] = env.get(Env.MAX_JOB_AGE_S)
    assert ages == {"bulk": "21600", "urgent": "600"}
