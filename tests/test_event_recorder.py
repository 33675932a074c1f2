"""The recorder: SES's events onto the key's ledger record, idempotent, order-free, never creating a record."""

from __future__ import annotations

import io
import json
import re

import boto3
import pytest
from consumer_harness import FakeClock
from hypothesis import given
from hypothesis import strategies as st
from ses_event_fixtures import OWN_OBJECTS, ses_event, sqs_records

from sendonce_contract.key_tags import TAG_VALUE_MAX, key_from_tags, key_tags
from sendonce_contract.schema import Ledger
from sendonce_contract.sqs_limits import SQS_MIN_RETENTION_S
from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings
from sendonce_runtime.evidence import CLOCK_SKEW_MARGIN_MS
from sendonce_runtime.ses_events import MalformedEvent, parse_event

ACCEPTED = "mail.timestamp"
EXPECTED_ATTRIBUTES = {
    "Send": {},
    "Delivery": {"deliveredAt": "1476919264133"},
    "Bounce": {"bouncedAt": "1501893662669", "bounceType": "Permanent", "bounceSubType": "General"},
    "Complaint": {"complainedAt": "1501893662669", "complaintFeedbackType": "abuse"},
    "Reject": {"rejectedAt": ACCEPTED, "rejectReason": "Bad content"},  # no time of its own: SES's acceptance
    "DeliveryDelay": {"delayedAt": "1592266540641", "delayType": "MailboxFull"},
    "Rendering Failure": {"renderingFailedAt": ACCEPTED,
                          "renderingError": "Attribute 'attributeName' is not present in the rendering data."},
}


@pytest.fixture
def recorder(pipeline):
    clock = FakeClock()
    dlq = boto3.client("sqs").create_queue(QueueName="evidence-dlq")["QueueUrl"]
    log = io.StringIO()
    recorder = EventRecorder.from_clients(RecorderSettings(pipeline.table_name, dlq, "test-pipeline", "Test/P"),
                                          boto3.client("dynamodb"), boto3.client("sqs"), clock, EventLog(log, "Test/P"))
    recorder.clock, recorder.dlq, recorder.log_text = clock, dlq, log
    recorder.ledger = pipeline.consumer(clock).processor._ledger
    return recorder


def lines(recorder) -> list[dict]:
    return [json.loads(line) for line in recorder.log_text.getvalue().splitlines()]


def claim(recorder, key: str) -> None:
    """A claim whose worker died: IN_FLIGHT, lease already expired."""
    recorder.ledger.claim(key, "dead-worker", recorder.clock.now_ms() - 1, "hash")


@pytest.mark.parametrize("event_type", list(OWN_OBJECTS))
def test_each_event_type_confirms_the_send_and_records_its_outcome(pipeline, recorder, event_type):
    claim(recorder, "receipt:1:u1")
    event = ses_event(event_type, "receipt:1:u1", "ses-1", sent_at_ms=recorder.clock.now_ms())
    accepted = str(parse_event(json.dumps(event)).sent_at_ms)
    response = recorder.handle(sqs_records(event))
    assert response == {"batchItemFailures": []}
    item = pipeline.ledger_item("receipt:1:u1")
    assert item["status"]["S"] == "SENT" and item["sesMessageId"]["S"] == "ses-1"
    assert item["sesMessageIds"]["SS"] == ["ses-1"]
    assert item["sesAcceptedAt"]["N"] == accepted and "evidenceAt" in item and "leaseExpiresAt" not in item
    for name, value in EXPECTED_ATTRIBUTES[event_type].items():
        assert next(iter(item[name].values())) == (accepted if value == ACCEPTED else value)
    [line] = lines(recorder)
    assert line["outcome"] == "recorded" and line["wasStatus"] == "IN_FLIGHT"
    assert line["SendsConfirmed"] == 1 and line["UndecidedSendsSettled"] == 1 and "ConfirmationLatency" in line


def test_a_duplicated_event_changes_nothing(pipeline, recorder):
    claim(recorder, "k:dup")
    event = ses_event("Delivery", "k:dup", "ses-1")
    recorder.handle(sqs_records(event))
    first = pipeline.ledger_item("k:dup")
    recorder.handle(sqs_records(event, event))
    assert pipeline.ledger_item("k:dup") == first
    assert [line.get("SendsConfirmed") for line in lines(recorder)] == [1, None, None]
    assert not any("DoubleSends" in line for line in lines(recorder))


def test_a_delivery_before_its_send_confirms_just_as_well(pipeline, recorder):
    claim(recorder, "k:order")
    recorder.handle(sqs_records(ses_event("Delivery", "k:order", "ses-1"), ses_event("Send", "k:order", "ses-1")))
    item = pipeline.ledger_item("k:order")
    assert item["status"]["S"] == "SENT" and item["sesMessageIds"]["SS"] == ["ses-1"]
    assert item["deliveredAt"]["N"] == "1476919264133"


def test_an_unknown_record_is_marked_sent_by_ses_evidence(pipeline, recorder):
    claim(recorder, "k:unknown")
    pipeline.consumer(recorder.clock).processor._ledger.mark_unknown(
        recorder.ledger.claim("k:unknown", "someone", 0, "hash").existing)
    assert pipeline.status("k:unknown") == "UNKNOWN"
    recorder.handle(sqs_records(ses_event("Send", "k:unknown", "ses-1")))
    assert pipeline.status("k:unknown") == "SENT"
    assert lines(recorder)[-1]["wasStatus"] == "UNKNOWN"


def test_a_second_message_id_for_a_key_is_a_double_kept_and_counted_once(pipeline, recorder):
    claim(recorder, "k:double")
    recorder.handle(sqs_records(ses_event("Send", "k:double", "ses-1")))
    recorder.handle(sqs_records(ses_event("Send", "k:double", "ses-2"), ses_event("Delivery", "k:double", "ses-2")))
    item = pipeline.ledger_item("k:double")
    assert sorted(item["sesMessageIds"]["SS"]) == ["ses-1", "ses-2"]
    doubles = [line for line in lines(recorder) if line.get("DoubleSends")]
    assert len(doubles) == 1 and doubles[0]["level"] == "ERROR" and doubles[0]["outcome"] == "double_send"


def test_an_event_for_a_key_never_claimed_creates_nothing_and_is_counted(pipeline, recorder):
    recorder.handle(sqs_records(ses_event("Send", "k:nobody", "ses-1")))
    assert pipeline.ledger_item("k:nobody") is None
    assert lines(recorder)[-1]["outcome"] == "unknown_key" and lines(recorder)[-1]["UnknownKeyEvents"] == 1


def test_an_expired_record_is_not_revived(pipeline, recorder):
    claim(recorder, "k:old")
    before = pipeline.ledger_item("k:old")
    recorder.clock.advance(8 * 86_400_000)  # past the default dedupe_ttl: the record counts as absent
    recorder.handle(sqs_records(ses_event("Send", "k:old", "ses-1")))
    assert pipeline.ledger_item("k:old") == before
    assert lines(recorder)[-1]["outcome"] == "expired_key"


def test_an_email_accepted_before_the_keys_claim_is_an_earlier_lifetimes_and_leaves_the_record_alone(pipeline,
                                                                                                       recorder):
    claim(recorder, "k:lifetime")
    claimed_at = recorder.clock.now_ms()
    before = pipeline.ledger_item("k:lifetime")
    earlier = claimed_at - CLOCK_SKEW_MARGIN_MS - 1_000  # beyond any skew between SES's clock and the consumer's
    recorder.handle(sqs_records(ses_event("Bounce", "k:lifetime", "ses-old", sent_at_ms=earlier)))
    assert pipeline.ledger_item("k:lifetime") == before
    line = lines(recorder)[-1]
    assert line["outcome"] == "earlier_lifetime" and line["EarlierLifetimeEvents"] == 1 and "DoubleSends" not in line
    # An email SES stamped a little before the claim, its clock behind the consumer's, is this lifetime's.
    skewed = claimed_at - CLOCK_SKEW_MARGIN_MS // 2
    recorder.handle(sqs_records(ses_event("Send", "k:lifetime", "ses-new", sent_at_ms=skewed)))
    assert pipeline.status("k:lifetime") == "SENT" and lines(recorder)[-1]["outcome"] == "recorded"


def test_the_clock_skew_margin_is_far_below_the_shortest_dedupe_ttl():
    # The shortest dedupe_ttl synth allows is the shortest retention_period (rule DedupeTtlTooShort).
    assert CLOCK_SKEW_MARGIN_MS * 10 <= SQS_MIN_RETENTION_S * 1000


def test_a_record_of_the_previous_release_takes_every_event_as_it_did(pipeline, recorder):
    claim(recorder, "k:previous")
    boto3.client("dynamodb").update_item(TableName=pipeline.table_name, Key={"dedupeKey": {"S": "k:previous"}},
                                         UpdateExpression=f"REMOVE {Ledger.LIFETIME_STARTED_AT}")
    recorder.handle(sqs_records(ses_event("Send", "k:previous", "ses-1", sent_at_ms=1476919252240)))
    assert pipeline.status("k:previous") == "SENT" and lines(recorder)[-1]["outcome"] == "recorded"


@pytest.mark.parametrize(("body", "reason"), [
    ("not json", "body is not JSON"),
    (json.dumps({"source": "aws.s3", "detail": {}}), "not an EventBridge event from aws.ses"),
    (json.dumps({"source": "aws.ses"}), "no detail object"),
    (json.dumps({"source": "aws.ses", "detail": {"eventType": "Teleport"}}), "unknown eventType 'Teleport'"),
    (json.dumps({"source": "aws.ses", "detail": {"eventType": "Send", "send": {}}}), "no mail object"),
])
def test_a_malformed_event_goes_to_the_dlq_with_its_reason_and_never_fails_the_batch(pipeline, recorder, body,
                                                                                     reason):
    claim(recorder, "k:fine")
    response = recorder.handle(sqs_records(body, ses_event("Send", "k:fine", "ses-1")))
    assert response == {"batchItemFailures": []}
    assert pipeline.status("k:fine") == "SENT"
    [dead] = boto3.client("sqs").receive_message(QueueUrl=recorder.dlq, MessageAttributeNames=["All"])["Messages"]
    assert dead["Body"] == body
    assert dead["MessageAttributes"]["sendonce.reasonCode"]["StringValue"] == "malformed-event"
    assert reason in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]


@pytest.mark.parametrize("break_it", ["no tags", "chunks of another key", "bad timestamp", "no own object"])
def test_events_missing_what_the_recorder_needs_are_malformed(break_it):
    event = ses_event("Delivery", "receipt:1:ü", "ses-1")
    mail = event["detail"]["mail"]
    if break_it == "no tags":
        del mail["tags"]
    elif break_it == "chunks of another key":
        mail["tags"]["sendonce-k0"] = [dict(key_tags("receipt:2:ü"))["sendonce-k0"]]
    elif break_it == "bad timestamp":
        mail["timestamp"] = "yesterday"
    else:
        del event["detail"]["delivery"]
    with pytest.raises(MalformedEvent):
        parse_event(json.dumps(event))


def test_opens_clicks_and_other_pipelines_are_acknowledged_without_a_write(pipeline, recorder):
    claim(recorder, "k:other")
    opened = ses_event("Send", "k:other", "ses-1")
    opened["detail"]["eventType"] = "Open"
    response = recorder.handle(sqs_records(opened, ses_event("Send", "k:other", "ses-1", pipeline="another")))
    assert response == {"batchItemFailures": []}
    assert pipeline.status("k:other") == "IN_FLIGHT"
    assert [line["outcome"] for line in lines(recorder)] == ["ignored", "other_pipeline"]


def test_a_ledger_error_fails_only_its_record(pipeline, recorder):
    broken = EventRecorder.from_clients(RecorderSettings("no-such-table", recorder.dlq), boto3.client("dynamodb"),
                                        boto3.client("sqs"), recorder.clock, EventLog(io.StringIO()))
    response = broken.handle(sqs_records("not json", ses_event("Send", "k:any", "ses-1")))
    assert response == {"batchItemFailures": [{"itemIdentifier": "evidence-1"}]}


keys = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=400).filter(
    lambda k: k == k.strip() and len(k.encode()) <= 1024)


@given(keys)
def test_every_key_the_contract_allows_travels_exactly_in_ses_tags(key):
    tags = key_tags(key)
    assert len(tags) <= 7
    assert all(re.fullmatch(rf"[A-Za-z0-9_-]{{1,{TAG_VALUE_MAX}}}", v) for _, v in tags)
    assert key_from_tags({name: [value] for name, value in tags}) == key


def test_the_longest_key_needs_six_chunks():
    key = "é" * 512  # 1024 bytes
    tags = dict(key_tags(key))
    assert [n for n in tags if n.startswith("sendonce-k")][-1] == "sendonce-k5"
    assert key_from_tags({n: [v] for n, v in tags.items()}) == key


def test_a_resend_whose_own_events_are_lost_is_a_double_when_the_first_emails_late_event_arrives(pipeline, recorder,
                                                                                                   capsys):
    from sendonce_contract.record import EmailRecord
    from sendonce_ops.cli import main as sendonce

    # The first worker died after SES accepted "ses-first"; its events came later than the grace period, so a
    # takeover resent the key and recorded SES's answer "ses-resend", whose own events are then lost.
    claim(recorder, "k:late")
    dead = EmailRecord.from_item(pipeline.ledger_item("k:late"))
    assert recorder.ledger.take_over(dead, "takeover", recorder.clock.now_ms() + 60_000, "hash").won
    assert recorder.ledger.mark_sent("k:late", "takeover", "ses-resend").recorded
    recorder.handle(sqs_records(ses_event("Send", "k:late", "ses-first"), ses_event("Delivery", "k:late", "ses-first")))
    doubles = [line for line in lines(recorder) if line.get("DoubleSends")]
    assert len(doubles) == 1 and doubles[0]["outcome"] == "double_send"
    assert sendonce(["--json", "--table", pipeline.table_name, "doubles"]) == 0
    [double] = json.loads(capsys.readouterr().out)
    assert double["key"] == "k:late" and double["every_ses_message_id"] == ["ses-first", "ses-resend"]
