"""Safe upgrades: a job of a newer contract waits for its consumer instead of being dead-lettered, and the previous
release's consumer and this one read each other's jobs and ledger items (see the README's "Upgrading")."""

from __future__ import annotations

import io
import json
from pathlib import Path

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from previous_release import run_previous_consumer, unpack_previous_release

from sendonce_contract.message import CONTRACT_VERSION, VERSION_FIELD, InvalidMessage, parse_job
from sendonce_producer import EmailJob
from sendonce_runtime.outcome_log import OutcomeLog


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_previous_release(tmp_path_factory.mktemp("previous-release"))


@pytest.fixture
def jobs(aws) -> str:
    return str(boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"])


def this_release_job(key: str) -> str:
    """A job as this release's producer writes it."""
    return EmailJob(dedupe_key=key, sender="Shop <receipts@example.com>", to=["ada@example.org"],
                    subject=f"Receipt {key}", text="Thanks for your order.").to_message()


def settings_of(pipeline, jobs: str) -> dict[str, object]:
    return {"table_name": pipeline.table_name, "dead_letter_queue_url": pipeline.dead_letter_queue_url,
            "queue_url": jobs, "max_receive_count": 5}


def test_a_job_of_a_newer_contract_comes_back_as_a_delayed_copy_never_dead_lettered(pipeline, jobs):
    consumer = pipeline.consumer(queue_url=jobs, max_receive_count=5)
    log = io.StringIO()
    consumer.log = OutcomeLog(log, pipeline="Shop/Receipts")
    newer = job("receipt:v2:u1", **{VERSION_FIELD: CONTRACT_VERSION + 1, "sendAt": "2030-01-01T00:00:00Z"})
    record = sqs_record(newer, receive_count=1)

    response = consumer.handle(event(record), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}  # acknowledged: its copy starts with a fresh receive count
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=jobs, AttributeNames=["ApproximateNumberOfMessagesDelayed"])["Attributes"]
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) == 1
    line = json.loads(log.getvalue())
    assert line["outcome"] == "contract_too_new" and line["ContractTooNew"] == 1
    assert 300 <= line["postponedSeconds"] <= 450
    assert line["dedupeKey"] == "receipt:v2:u1"
    assert pipeline.dead_letters() == []
    assert pipeline.emails_for("receipt:v2:u1") == 0
    assert pipeline.ledger_item("receipt:v2:u1") is None  # nothing claimed: the upgraded consumer sends it


def test_the_contract_version_is_a_positive_integer_and_one_when_absent():
    assert parse_job(json.dumps(job("k")), "m") == parse_job(json.dumps(job("k", **{VERSION_FIELD: 1})), "m")
    for bad in (0, -1, "2", 1.5, True, None):
        with pytest.raises(InvalidMessage, match=VERSION_FIELD):
            parse_job(json.dumps(job("k", **{VERSION_FIELD: bad})), "m")


def test_this_release_producer_writes_jobs_the_previous_release_consumer_sends_once(pipeline, jobs,
                                                                                   previous_release):
    body = this_release_job("receipt:old-consumer:u1")
    assert VERSION_FIELD not in json.loads(body)  # version 1 is implicit, so older consumers read it

    for _ in range(2):  # a duplicate too
        run = run_previous_consumer(previous_release, settings_of(pipeline, jobs), event(sqs_record(body)))
        assert run["response"] == {"batchItemFailures": []}

    assert [line["outcome"] for line in run["outcomes"]] == ["duplicate"]
    assert pipeline.emails_for("receipt:old-consumer:u1") == 1
    assert pipeline.status("receipt:old-consumer:u1") == "SENT"
    assert pipeline.dead_letters() == []


def test_ledger_items_cross_versions_both_ways_and_a_newer_item_is_read_without_error(pipeline, jobs,
                                                                                      previous_release):
    consumer = pipeline.consumer(queue_url=jobs, max_receive_count=5)
    # The previous release sends one key, this one sends another; then each meets the other's ledger item.
    old_key, new_key = "receipt:sent-by-old:u1", "receipt:sent-by-new:u1"
    run_previous_consumer(previous_release, settings_of(pipeline, jobs), event(sqs_record(this_release_job(old_key))))
    assert consumer.handle(event(sqs_record(this_release_job(new_key))), FakeContext(FakeClock())) == {
        "batchItemFailures": []}

    assert consumer.handle(event(sqs_record(this_release_job(old_key))), FakeContext(FakeClock())) == {
        "batchItemFailures": []}
    run = run_previous_consumer(previous_release, settings_of(pipeline, jobs),
                                event(sqs_record(this_release_job(new_key))))
    assert [line["outcome"] for line in run["outcomes"]] == ["duplicate"]

    # A later release may add attributes to the item: both readers ignore what they do not know.
    for key in (old_key, new_key):
        boto3.client("dynamodb").update_item(
            TableName=pipeline.table_name, Key={"dedupeKey": {"S": key}},
            UpdateExpression="SET futureAttribute = :v, futureCounter = :n",
            ExpressionAttributeValues={":v": {"M": {"nested": {"S": "x"}}}, ":n": {"N": "7"}})
    run = run_previous_consumer(previous_release, settings_of(pipeline, jobs),
                                event(sqs_record(this_release_job(old_key))))
    assert [line["outcome"] for line in run["outcomes"]] == ["duplicate"]
    assert consumer.handle(event(sqs_record(this_release_job(new_key))), FakeContext(FakeClock())) == {
        "batchItemFailures": []}

    assert pipeline.emails_for(old_key) == 1 and pipeline.emails_for(new_key) == 1
    assert pipeline.dead_letters() == []
