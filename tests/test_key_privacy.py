"""key_privacy: outside the job body a key is only its keyed digest (the ledger, SES's tags and events, the logs, the
DLQ's attributes), and the operator still types the clear key. Emails are counted in the emulator's SES."""

from __future__ import annotations

import json
import logging

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record

from sendonce_constructs.local.ses_publisher import SEND_LOG
from sendonce_constructs.ops.cli import main as sendonce
from sendonce_contract.key_digest import key_digest

# The playbook's own example: the key carries an address.
KEY = "order-1042:shipped:ada@example.org"
SECRET = "k" * 32 + "4" * 32
ALL = float("inf")


@pytest.fixture
def secret_arn(aws) -> str:
    return boto3.client("secretsmanager").create_secret(Name="sendonce-keys", SecretString=SECRET)["ARN"]


def digest(key: str) -> str:
    return key_digest(SECRET.encode(), key)


def private(pipeline, clock, secret_arn, **overrides):
    return pipeline.consumer(clock, key_secret_id=secret_arn, **pipeline.evidence_settings(), **overrides)


def everything_written(pipeline, consumer) -> str:
    """What left the job body: ledger items, DLQ attributes, SES's tags, the consumer's and the recorder's logs."""
    items = boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"]
    dead = [m.get("MessageAttributes", {}) for m in pipeline.dead_letters()]
    tags = [send.tags for send in SEND_LOG.since(0)]
    return json.dumps([items, dead, tags, consumer.log._stream.getvalue(),
                       pipeline.recorder_log.getvalue() if pipeline.recorder_log else ""], default=str)


def test_a_private_key_is_sent_once_and_only_its_digest_leaves_the_job_body(pipeline, secret_arn, caplog):
    clock = FakeClock()
    SEND_LOG.clear()
    ses_events = pipeline.ses_events(clock)
    consumer = private(pipeline, clock, secret_arn)
    caplog.set_level(logging.DEBUG, logger="sendonce")
    record = sqs_record(job(KEY, to=["Ada <ada@example.org>"]))
    consumer.handle(event(record, sqs_record(job(KEY, to=["Ada <ada@example.org>"]))), FakeContext(clock))
    consumer.handle(event(record), FakeContext(clock))  # delivered again
    ses_events.pump(ALL)

    assert pipeline.emails_for(KEY) == 1
    assert pipeline.ledger_item(KEY) is None
    item = pipeline.ledger_item(digest(KEY))
    assert item["status"]["S"] == "SENT" and item["sesMessageIds"]["SS"]  # the recorder found it by the digest
    [send] = SEND_LOG.since(0)
    assert ("sendonce-key", digest(KEY)) in send.tags  # one tag: a digest needs no chunks
    assert not any(name.startswith("sendonce-k0") for name, _ in send.tags)
    written = everything_written(pipeline, consumer) + caplog.text
    assert "order-1042" not in written and "ada@example.org" not in written
    assert digest(KEY) in consumer.log._stream.getvalue()


def test_a_dead_letter_carries_the_digest_and_a_reason_without_the_key(pipeline, secret_arn):
    consumer = private(pipeline, FakeClock(), secret_arn)
    broken = job(KEY, subject="")  # breaks the contract after the key was read
    bad_key = job(" " + KEY)  # the key itself breaks it: its text is quoted in the reason, then taken out
    consumer.handle(event(sqs_record(broken), sqs_record(bad_key)), FakeContext(FakeClock()))
    dead = {m["MessageAttributes"]["sendonce.reason"]["StringValue"]: m["MessageAttributes"]
            for m in pipeline.dead_letters()}
    assert len(dead) == 2 and "order-1042" not in json.dumps(list(dead.values()))
    keys = [attributes.get("sendonce.dedupeKey", {}).get("StringValue") for attributes in dead.values()]
    assert sorted(keys, key=str) == sorted([digest(KEY), None], key=str)
    assert any("dedupeKey <dedupeKey> starts or ends with white space" in reason for reason in dead)
    assert pipeline.emails_for(KEY) == 0


def test_the_secret_is_read_once_per_execution_environment(pipeline, secret_arn):
    clock = FakeClock()
    consumer = private(pipeline, clock, secret_arn)
    client = consumer.processor._private_keys._client
    calls = []
    read = client.get_secret_value
    client.get_secret_value = lambda **kwargs: calls.append(kwargs) or read(**kwargs)
    for n in range(3):
        consumer.handle(event(*(sqs_record(job(f"k:{n}:{i}")) for i in range(4))), FakeContext(clock))
    assert len(calls) == 1 and sum(pipeline.emails_per_key().values()) == 12


def test_an_unreadable_secret_sends_nothing_claims_nothing_and_retries(pipeline, aws):
    clock = FakeClock()
    consumer = private(pipeline, clock, "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf")
    record = sqs_record(job(KEY))
    assert failed_ids(consumer.handle(event(record), FakeContext(clock))) == {record["messageId"]}
    assert pipeline.emails_for(KEY) == 0
    assert boto3.client("dynamodb").scan(TableName=pipeline.table_name)["Items"] == []
    assert SECRET not in consumer.log._stream.getvalue()


def test_the_operator_types_the_clear_key(pipeline, secret_arn, capsys):
    clock = FakeClock()
    private(pipeline, clock, secret_arn).handle(event(sqs_record(job(KEY))), FakeContext(clock))
    where = ["--table", pipeline.table_name, "--key-secret", secret_arn]
    assert sendonce([*where, "--json", "status", KEY]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "SENT" and shown["key"] == digest(KEY)
    assert sendonce([*where, "status", digest(KEY)]) == 0  # a digest from a listing is taken as it is
    assert "SENT" in capsys.readouterr().out
    assert sendonce(["--table", pipeline.table_name, "status", KEY]) == 0  # without the secret: not found
    assert "never seen" in capsys.readouterr().out


def test_ses_refusal_texts_lose_their_addresses_in_the_dlq_and_the_log(pipeline):
    consumer = pipeline.consumer()
    refused = job("k:refused", **{"from": "Shop <nobody@unverified.example.net>"})
    consumer.handle(event(sqs_record(refused)), FakeContext(FakeClock()))
    [message] = pipeline.dead_letters()
    reason = message["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert reason.startswith("MessageRejected") and "<address>" in reason
    written = json.dumps(message["MessageAttributes"]) + consumer.log._stream.getvalue()
    assert "nobody@unverified.example.net" not in written


def test_log_lines_never_carry_addresses_subjects_or_bodies(pipeline):
    consumer = pipeline.consumer()
    jobs = [job("k:ok", to=["Ada <ada@example.org>"], cc=["bob@example.org"], text="secret body"),
            job("k:bad-to", to=["ada@example.org, eve@example.org"], text="secret body"),
            job("k:bad-from", **{"from": "shop@@example.com"}, text="secret body")]
    consumer.handle(event(*(sqs_record(j) for j in jobs)), FakeContext(FakeClock()))
    log = consumer.log._stream.getvalue()
    assert len(log.splitlines()) == 3
    for text in ("example.org", "shop@", "Receipt k:", "secret body"):
        assert text not in log, text
