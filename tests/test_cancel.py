"""Cancel: a tombstone every later claim respects; exactly one of a cancel and a claim wins the key."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime

import aws_cdk as cdk
import boto3
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template
from consumer_harness import FakeClock, FakeContext, event, job, run_at_once, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_constructs import SendOnceEmailQueue
from sendonce_contract.schema import Status
from sendonce_ops.cli import main as sendonce
from sendonce_producer import Pipeline, cancel, status
from sendonce_runtime.outcome_log import OutcomeLog

DAY_MS = 86_400_000


def deliver(pipeline, key: str, clock=None, body=None, **settings) -> dict:
    clock = clock or FakeClock()
    consumer = pipeline.consumer(clock, **settings)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Test/Receipts")
    consumer.handle(event(sqs_record(body or job(key))), FakeContext(clock))
    return json.loads(log.getvalue().splitlines()[-1])


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")


def test_a_key_cancelled_before_any_delivery_is_never_sent_and_every_copy_is_acknowledged(pipeline):
    done = cancel(pipeline.table_name, "k:cancel-first")
    assert done.cancelled and "cancelled" in done.explanation
    for _ in range(3):  # the job, a duplicate, a re-enqueue
        line = deliver(pipeline, "k:cancel-first")
        assert line["outcome"] == "cancelled" and line["Cancelled"] == 1
    assert pipeline.emails_for("k:cancel-first") == 0
    record = status(pipeline.table_name, "k:cancel-first")
    assert record is not None and record.state is Status.CANCELLED


def test_a_cancel_after_the_send_is_too_late_and_says_so(pipeline):
    deliver(pipeline, "k:sent-first")
    late = cancel(pipeline.table_name, "k:sent-first")
    assert not late.cancelled and late.record.state is Status.SENT and "already sent" in late.explanation
    assert pipeline.emails_for("k:sent-first") == 1


def test_a_cancel_while_a_worker_holds_the_key_is_too_late(pipeline):
    ledger = pipeline.consumer(FakeClock()).processor._ledger
    ledger.claim("k:busy", "worker", FakeClock().now_ms() + 60_000, "hash")
    late = Pipeline(queue_url="unused", table_name=pipeline.table_name).cancel("k:busy")
    assert not late.cancelled and late.record.state is Status.IN_FLIGHT and "may be sending" in late.explanation


def test_a_job_scheduled_past_the_producers_old_lifetime_stays_cancelled_with_an_outbox_dedupe_ttl(pipeline):
    """With ``outbox=True`` the pipeline's dedupe_ttl is 19 days, so it takes a sendAt 10 days ahead: a cancel as the
    docs show it (no lifetime passed, by the producer or by ``sendonce cancel``) must hold until the job is due."""
    clock = FakeClock()
    for key, cancel_it in (("k:ten-days-producer", lambda key: cancel(pipeline.table_name, key).cancelled),
                           ("k:ten-days-operator",
                            lambda key: sendonce(["--table", pipeline.table_name, "cancel", key]) == 0)):
        body = job(key, sendAt=iso(clock.now_ms() + 10 * DAY_MS))
        assert deliver(pipeline, key, clock, body, dedupe_ttl_s=19 * 86_400)["outcome"] == "scheduled"
        assert cancel_it(key)
    clock.advance(10 * DAY_MS + 60_000)
    for key in ("k:ten-days-producer", "k:ten-days-operator"):
        body = job(key, sendAt=iso(clock.now_ms() - 60_000))
        assert deliver(pipeline, key, clock, body, dedupe_ttl_s=19 * 86_400)["outcome"] == "cancelled"
        assert pipeline.emails_for(key) == 0


def test_a_job_that_reaches_a_worker_after_a_backlog_stays_cancelled(pipeline):
    """With the defaults, a job due in just under a week that a backlog (or an SES stop) holds past the week is met
    by its cancel, however late it comes within the queue's retention and a redrive."""
    clock = FakeClock()
    body = job("k:backlogged", sendAt=iso(clock.now_ms() + 7 * DAY_MS - 60_000))
    assert deliver(pipeline, "k:backlogged", clock, body)["outcome"] == "scheduled"
    assert cancel(pipeline.table_name, "k:backlogged").cancelled
    clock.advance(7 * DAY_MS + 14 * DAY_MS + 14 * DAY_MS)  # due, then the queue's longest retention, a DLQ's, waited
    assert deliver(pipeline, "k:backlogged", clock, body)["outcome"] == "cancelled"
    assert pipeline.emails_for("k:backlogged") == 0


def test_cancel_takes_no_lifetime_and_the_old_arguments_are_ignored_with_a_warning(pipeline, capsys):
    with pytest.warns(DeprecationWarning, match="ignored"):
        assert cancel(pipeline.table_name, "k:old-arg", dedupe_ttl_s=60).cancelled
    with pytest.warns(DeprecationWarning, match="ignored"):
        Pipeline(queue_url="unused", table_name=pipeline.table_name, dedupe_ttl_s=60)
    assert sendonce(["--table", pipeline.table_name, "cancel", "k:old-flag", "--dedupe-ttl-days", "1"]) == 0
    assert "--dedupe-ttl-days is no longer needed" in capsys.readouterr().err
    item = pipeline.ledger_item("k:old-flag")
    assert int(item["expiresAt"]["N"]) - int(item["cancelledAt"]["N"]) // 1000 == 88 * 86_400


def test_cancelling_twice_reports_cancelled_both_times(pipeline):
    assert cancel(pipeline.table_name, "k:twice").cancelled
    assert cancel(pipeline.table_name, "k:twice").cancelled


def test_a_forgotten_key_can_be_cancelled_again(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock, dedupe_ttl_s=60).handle(event(sqs_record(job("k:old"))), FakeContext(clock))
    boto3.client("dynamodb").update_item(TableName=pipeline.table_name, Key={"dedupeKey": {"S": "k:old"}},
                                         UpdateExpression="SET expiresAt = :past",
                                         ExpressionAttributeValues={":past": {"N": "1"}})
    assert cancel(pipeline.table_name, "k:old").cancelled
    assert deliver(pipeline, "k:old")["outcome"] == "cancelled"


@given(copies=st.integers(1, 4), cancel_at=st.integers(0, 4), threaded=st.booleans())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_cancel_against_concurrent_consumers_never_sends_after_a_successful_cancel_and_never_loses_without_one(
    pipeline, copies, cancel_at, threaded
):
    key = f"k:race:{uuid.uuid4().hex[:8]}"
    results: list = []

    def cancel_it() -> None:
        results.append(cancel(pipeline.table_name, key))

    work = [lambda: deliver(pipeline, key) for _ in range(copies)]
    work.insert(min(cancel_at, copies), cancel_it)
    if threaded:
        run_at_once(work)
    else:
        for step in work:
            step()
    [outcome] = results
    emails = pipeline.emails_for(key)
    if outcome.cancelled:
        assert emails == 0, "sent after a successful cancel"
    else:
        deliver(pipeline, key)  # SQS brings back any copy a live lease held off
        assert pipeline.emails_for(key) == 1, "lost without a successful cancel"


def test_sendonce_cancel_says_in_one_line_whether_it_was_in_time(pipeline, capsys):
    assert sendonce(["--table", pipeline.table_name, "cancel", "k:ops"]) == 0
    assert capsys.readouterr().out.strip() == "k:ops: cancelled; no email will be sent for it"
    deliver(pipeline, "k:ops-sent")
    assert sendonce(["--table", pipeline.table_name, "cancel", "k:ops-sent"]) == 1
    assert "too late to cancel: it was already sent" in capsys.readouterr().out
    assert sendonce(["--json", "--table", pipeline.table_name, "status", "k:ops"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "CANCELLED"


def test_grant_cancel_allows_put_item_on_the_dedupe_table():
    stack = cdk.Stack(cdk.App(), "Test")
    pipeline = SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    app = iam.Role(stack, "App", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
    assert pipeline.grant_cancel(app).success
    [policy] = [r for name, r in Template.from_stack(stack).to_json()["Resources"].items()
                if r["Type"] == "AWS::IAM::Policy" and name.startswith("AppDefaultPolicy")]
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "dynamodb:PutItem"
    assert statement["Resource"][0]["Fn::GetAtt"][0].startswith("ReceiptsDedupeTable")
