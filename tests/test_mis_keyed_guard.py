"""The mis-keyed-producer guard (``suspected_doubles``, ``recipient_cap``): the same content to the same recipients
under another key within the window is flagged or held, a recipient over the cap is held, a redrive sends what was
held, and a redelivery of the same key never counts twice. Through the real consumer against the emulator; emails
are counted in the emulator's SES."""

from __future__ import annotations

import hashlib
import io
import json
from typing import Any

import aws_cdk as cdk
import boto3
from construct_support import build, only
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record

from sendonce_constructs import OnSuspectedDouble
from sendonce_contract import outcome_events
from sendonce_contract.deploy_config import Env
from sendonce_contract.key_digest import key_digest
from sendonce_contract.schema import CopyAttribute, DeadLetter, GuardItem, ReasonCode
from sendonce_local.lambda_service.sqs_source import EventSourceSpec, lambda_record
from sendonce_ops.cli import main as sendonce
from sendonce_runtime.outcome_log import OutcomeLog

MINUTE_MS = 60_000
WINDOW_S = 600
# The same receipt, as a producer keying jobs by SQS message id enqueues it again: same recipients, same content.
RECEIPT = {"subject": "Your receipt for order 8891", "text": "Thanks for your order."}


def receipt(key: str, **fields: Any) -> dict[str, Any]:
    return job(key, **{**RECEIPT, **fields})


def guarded(pipeline, clock, **settings):
    settings.setdefault("guard_window_s", WINDOW_S)
    return pipeline.consumer(clock, pipeline_name="Test/Receipts", **settings)


def deliver(consumer, clock, *bodies: dict[str, Any], records: list[dict[str, Any]] | None = None) -> list[dict]:
    """Each record's log line (the outcome, its reason, its metrics)."""
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    consumer.handle(event(*(records or [sqs_record(body) for body in bodies])), FakeContext(clock))
    return [json.loads(text) for text in log.getvalue().splitlines() if '"outcome"' in text]


def emails_with_subject(pipeline, subject: str) -> int:
    return sum(1 for message in pipeline.aws.sent_emails() if getattr(message, "subject", "") == subject)


def guard_items(pipeline, kind: str) -> list[dict[str, Any]]:
    items = boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"]
    return [item for item in items if item.get(GuardItem.KIND, {}).get("S") == kind]


# -- suspected doubles ------------------------------------------------------------------------------------------------

def test_a_flagged_double_is_sent_counted_once_and_published_with_both_keys(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, suspected_doubles=OnSuspectedDouble.FLAG)
    [first] = deliver(consumer, clock, receipt("msg-a1"))
    assert first["outcome"] == "sent" and "SuspectedDoubles" not in str(first["_aws"])
    [second] = deliver(consumer, clock, receipt("msg-a2"))  # the same receipt, keyed by its new message id
    assert second["outcome"] == "sent" and second["suspectedDoubleOf"] == "msg-a1"
    assert {"Name": "SuspectedDoubles", "Unit": "Count"} in second["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    assert emails_with_subject(pipeline, RECEIPT["subject"]) == 2  # flagged, not held
    [again] = deliver(consumer, clock, receipt("msg-a2"))  # SQS delivers the suspect again: no second double
    assert again["outcome"] == "duplicate" and "suspectedDoubleOf" not in again
    [item] = guard_items(pipeline, GuardItem.CONTENT)
    [published] = outcome_events.transitions(None, item, "Test/Receipts")
    assert published.outcome is outcome_events.SUSPECTED_DOUBLE
    assert (published.detail["dedupeKey"], published.detail["firstKey"]) == ("msg-a2", "msg-a1")
    assert published.entry("bus")["DetailType"] == "Email Suspected Double"
    # The first key sent again (a redelivery of the original) is never its own double.
    [original] = deliver(consumer, clock, receipt("msg-a1"))
    assert original["outcome"] == "duplicate" and "suspectedDoubleOf" not in original


def test_a_held_double_goes_to_the_dlq_unsent_and_a_redrive_sends_it(pipeline, capsys):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, suspected_doubles=OnSuspectedDouble.HOLD)
    deliver(consumer, clock, receipt("msg-b1"))
    [held] = deliver(consumer, clock, receipt("msg-b2"))
    assert held["outcome"] == "suspected_double" and "under key 'msg-b1'" in held["reason"]
    assert "redrive it to send it" in held["reason"]
    assert pipeline.emails_for("msg-b2") == 0 and emails_with_subject(pipeline, RECEIPT["subject"]) == 1
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"][DeadLetter.REASON_CODE]["StringValue"] == ReasonCode.SUSPECTED_DOUBLE.value
    boto3.client("sqs").change_message_visibility(QueueUrl=pipeline.dead_letter_queue_url,
                                                  ReceiptHandle=dead["ReceiptHandle"], VisibilityTimeout=0)
    # The operator looked: it was a real second receipt. The redrive marks it released, and the guard lets it go.
    jobs = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    where = ["--queue", jobs, "--dlq", pipeline.dead_letter_queue_url, "--dedupe-ttl", "604800"]
    assert sendonce([*where, "dlq", "redrive", "--reason", ReasonCode.SUSPECTED_DOUBLE.value]) == 0
    assert "moved 1 messages back to the job queue" in capsys.readouterr().out
    [moved] = boto3.client("sqs").receive_message(QueueUrl=jobs, MessageAttributeNames=["All"],
                                                  MessageSystemAttributeNames=["All"])["Messages"]
    source = EventSourceSpec(queue_url=jobs, queue_arn="arn:aws:sqs:us-east-1:123456789012:jobs")
    [sent] = deliver(consumer, clock, records=[lambda_record(moved, source, "us-east-1")])
    assert sent["outcome"] == "sent" and pipeline.emails_for("msg-b2") == 0  # counted by subject: one more
    assert emails_with_subject(pipeline, RECEIPT["subject"]) == 2


def test_other_content_or_other_recipients_under_another_key_is_no_double(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, suspected_doubles=OnSuspectedDouble.HOLD)
    lines = deliver(consumer, clock, receipt("msg-c1"), receipt("msg-c2", text="Thanks for order 8892."),
                    receipt("msg-c3", to=["bob@example.org"]), receipt("msg-c4", to=["ada@example.org"], cc=["b@x.io"]))
    assert [line["outcome"] for line in lines] == ["sent"] * 4
    # Not content: headers, tags, expiresAt differ between attempts of one email and do not hide a double.
    [held] = deliver(consumer, clock, receipt("msg-c5", headers={"X-Attempt": "2"}))
    assert held["outcome"] == "suspected_double" and "under key 'msg-c1'" in held["reason"]


def test_after_the_window_the_same_content_under_a_new_key_is_sent_and_starts_a_new_window(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, suspected_doubles=OnSuspectedDouble.HOLD)
    deliver(consumer, clock, receipt("weekly:1"))
    clock.advance(WINDOW_S * 1000 + 1)
    [later] = deliver(consumer, clock, receipt("weekly:2"))
    assert later["outcome"] == "sent" and "suspectedDoubleOf" not in later
    [held] = deliver(consumer, clock, receipt("weekly:3"))  # within the new window of weekly:2
    assert held["outcome"] == "suspected_double" and "under key 'weekly:2'" in held["reason"]


def test_the_guard_keeps_digests_only_never_an_address_or_a_subject(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, suspected_doubles=OnSuspectedDouble.FLAG, recipient_cap=5)
    lines = deliver(consumer, clock, receipt("msg-d1"), receipt("msg-d2"))
    assert [line["outcome"] for line in lines] == ["sent", "sent"], lines
    items = guard_items(pipeline, GuardItem.CONTENT) + guard_items(pipeline, GuardItem.RECIPIENT)
    assert len(items) == 2
    assert "ada@example.org" not in str(items) and "8891" not in str(items)


def test_under_key_privacy_the_digests_are_keyed_by_the_key_secret(pipeline):
    secret = "g" * 64
    arn = boto3.client("secretsmanager").create_secret(Name="guard-keys", SecretString=secret)["ARN"]
    clock = FakeClock()
    consumer = guarded(pipeline, clock, key_secret_id=arn, suspected_doubles=OnSuspectedDouble.FLAG, recipient_cap=5)
    lines = deliver(consumer, clock, receipt("msg-k1"), receipt("msg-k2"))
    assert [line["outcome"] for line in lines] == ["sent", "sent"]
    assert lines[1]["suspectedDoubleOf"] == key_digest(secret.encode(), "msg-k1")  # the key as every log shows it
    [recipient] = guard_items(pipeline, GuardItem.RECIPIENT)
    unkeyed = hashlib.sha256(b"ada@example.org").hexdigest()
    keyed = hashlib.sha256(key_digest(secret.encode(), "ada@example.org").encode()).hexdigest()
    assert keyed in recipient[GuardItem.KEY]["S"] and unkeyed not in recipient[GuardItem.KEY]["S"]
    assert "msg-k" not in str([*guard_items(pipeline, GuardItem.CONTENT), recipient])


# -- the recipient cap ------------------------------------------------------------------------------------------------

def test_a_recipient_over_the_cap_is_held_and_a_redelivery_of_a_counted_key_is_not(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, recipient_cap=2)
    lines = deliver(consumer, clock, job("loop:1"), job("loop:2"), job("loop:3"))
    assert [line["outcome"] for line in lines] == ["sent", "sent", "recipient_capped"]
    assert "already got 2 emails of this pipeline in its 600 s window (recipient_cap)" in lines[2]["reason"]
    assert {"Name": "RecipientCapped", "Unit": "Count"} in lines[2]["_aws"]["CloudWatchMetrics"][0]["Metrics"]
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"][DeadLetter.REASON_CODE]["StringValue"] == ReasonCode.RECIPIENT_CAP.value
    [again] = deliver(consumer, clock, job("loop:2"))  # counted already: a duplicate, not over the cap
    assert again["outcome"] == "duplicate"
    [other] = deliver(consumer, clock, job("loop:4", to=["bob@example.org"]))
    assert other["outcome"] == "sent"
    clock.advance(WINDOW_S * 1000)  # the next window
    [next_window] = deliver(consumer, clock, job("loop:5"))
    assert next_window["outcome"] == "sent"
    assert pipeline.emails_for("loop:3") == 0 and sum(pipeline.emails_per_key().values()) == 4


def test_a_job_over_the_cap_for_one_of_its_recipients_counts_for_none(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, recipient_cap=1)
    deliver(consumer, clock, job("team:1", to=["ada@example.org"]))
    [held] = deliver(consumer, clock, job("team:2", to=["bob@example.org", "ada@example.org"]))
    assert held["outcome"] == "recipient_capped"
    [bob] = deliver(consumer, clock, job("team:3", to=["bob@example.org"]))  # team:2 took nothing of bob's
    assert bob["outcome"] == "sent"
    assert pipeline.emails_for("team:2") == 0


def test_a_released_job_passes_the_guard_unchecked(pipeline):
    clock = FakeClock()
    consumer = guarded(pipeline, clock, recipient_cap=1)
    deliver(consumer, clock, job("cap:1"))
    record = sqs_record(job("cap:2"))
    record["messageAttributes"] = {CopyAttribute.RELEASED: {"dataType": "String",
                                                         "stringValue": ReasonCode.RECIPIENT_CAP.value}}
    [released] = deliver(consumer, clock, records=[record])
    assert released["outcome"] == "sent" and pipeline.emails_for("cap:2") == 1


# -- the construct ----------------------------------------------------------------------------------------------------

def consumer_environment(template) -> dict[str, Any]:
    return only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]


def test_the_guard_reaches_the_consumer_with_its_alarms():
    # Without it the consumer's environment has none of it (test_construct_defaults pins the whole environment).
    pipeline, template = build(suspected_doubles=OnSuspectedDouble.HOLD, recipient_cap=20,
                               guard_window=cdk.Duration.minutes(30))
    env = consumer_environment(template)
    assert (env[Env.SUSPECTED_DOUBLES], env[Env.RECIPIENT_CAP], env[Env.GUARD_WINDOW_S]) == ("hold", "20", "1800")
    assert {"SuspectedDoubles", "RecipientCapped"} <= set(pipeline.alarms)
