"""`sendonce`, the operator command, against real records and messages in the emulator."""

from __future__ import annotations

import io
import json
import re
import time

import boto3
import pytest
from botocore.stub import Stubber
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_ops import dead_letters as dead_letters_module
from sendonce_ops.cli import main as sendonce
from sendonce_ops.dead_letters import DeadLetters
from sendonce_ops.ledger_view import LedgerView, StateChanged


@pytest.fixture
def ops(pipeline):
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    where = ["--table", pipeline.table_name, "--queue", queue_url, "--dlq", pipeline.dead_letter_queue_url,
             "--dedupe-ttl", str(DEDUPE_TTL_S)]

    def run(*args: str, capsys=None) -> tuple[int, str]:
        code = sendonce([*where, *args])
        return code, capsys.readouterr().out if capsys else ""

    return run, queue_url


DEDUPE_TTL_S = 7 * 86_400


def record_states(pipeline, clock):
    """One key in every state: SENT, UNKNOWN, IN_FLIGHT with a live lease, IN_FLIGHT whose lease expired."""
    consumer = pipeline.consumer(clock, delivery=DeliveryPolicy.NEVER_RESEND)
    consumer.handle(event(sqs_record(job("k:sent"))), FakeContext(clock))
    ledger = consumer.processor._ledger
    ledger.claim("k:unknown", "dead-1", clock.now_ms() - 1, "h")
    consumer.handle(event(sqs_record(job("k:unknown"))), FakeContext(clock))  # marks it UNKNOWN
    clock.advance(1_000)
    ledger.claim("k:stale", "dead-2", clock.now_ms() - 60_000, "h")
    ledger.claim("k:live", "alive", clock.now_ms() + 600_000, "h")


def test_status_shows_a_record_or_never_seen(pipeline, ops, capsys):
    run, _ = ops
    record_states(pipeline, FakeClock())
    code, out = run("status", "k:sent", capsys=capsys)
    assert code == 0 and "SENT" in out and "SES message id" in out
    code, out = run("--json", "status", "k:sent", capsys=capsys)
    assert json.loads(out)["status"] == "SENT" and json.loads(out)["ses_message_id"]
    assert run("status", "k:nobody", capsys=capsys)[1].strip() == (
        "k:nobody: never seen (no worker has claimed it: not enqueued, still queued, or waiting for its sendAt; or "
        "its record was deleted after dedupe_ttl)")


def test_unknown_lists_unknown_and_dead_in_flight_records_newest_first(pipeline, ops, capsys):
    run, _ = ops
    record_states(pipeline, FakeClock())
    code, out = run("--json", "unknown", capsys=capsys)
    assert code == 0
    assert [r["key"] for r in json.loads(out)] == ["k:stale", "k:unknown"]
    [stale_row] = [line for line in run("unknown", capsys=capsys)[1].splitlines() if line.startswith("k:stale ")]
    assert "IN_FLIGHT (lease expired)" in stale_row


def test_resolve_sent_records_the_operators_decision(pipeline, ops, capsys):
    run, _ = ops
    record_states(pipeline, FakeClock())
    code, out = run("resolve", "k:unknown", "--sent", capsys=capsys)
    assert code == 0 and "was UNKNOWN; recorded SENT" in out
    assert pipeline.status("k:unknown") == "SENT"


def test_resolve_resend_releases_the_key_so_the_next_delivery_sends_it(pipeline, ops, capsys):
    run, _ = ops
    clock = FakeClock()
    record_states(pipeline, clock)
    assert run("resolve", "k:stale", "--resend", capsys=capsys)[0] == 0
    assert pipeline.ledger_item("k:stale") is None
    pipeline.consumer(clock).handle(event(sqs_record(job("k:stale"))), FakeContext(clock))
    assert pipeline.emails_for("k:stale") == 1


@pytest.mark.parametrize("key", ["k:sent", "k:live", "k:nobody"])
def test_resolve_refuses_records_that_need_no_decision(pipeline, ops, capsys, key):
    run, _ = ops
    record_states(pipeline, FakeClock())
    before = pipeline.ledger_item(key)
    assert run("resolve", key, "--resend")[0] == 2
    assert "only UNKNOWN records" in capsys.readouterr().err
    assert pipeline.ledger_item(key) == before


def test_resolve_refuses_when_the_record_changed_underneath(pipeline):
    clock = FakeClock()
    record_states(pipeline, clock)
    view = LedgerView(boto3.client("dynamodb"), pipeline.table_name)
    seen = view.get("k:stale")
    # A resend-without-evidence consumer takes the dead claim over between the operator's read and write.
    ledger = pipeline.consumer(clock).processor._ledger
    assert ledger.take_over(ledger.claim("k:stale", "new", clock.now_ms() + 60_000, "h").existing, "new",
                            clock.now_ms() + 60_000, "h").won
    view.get = lambda key: seen  # the operator still looks at the old state
    with pytest.raises(StateChanged, match="changed while you looked at it"):
        view.resolve("k:stale", sent=True)
    assert pipeline.ledger_item("k:stale")["owner"]["S"] == "new"


def dead_letter_some(pipeline):
    consumer = pipeline.consumer()
    bad = [sqs_record("{oops"), sqs_record(job("k:bad", to="nobody")), sqs_record(job("k:typo", subjekt="x"))]
    refused = [sqs_record(job(f"k:refused{i}", **{"from": "x@unverified.example.net"})) for i in range(2)]
    consumer.handle(event(*bad, *refused), FakeContext(FakeClock()))


def test_dlq_list_groups_messages_by_reason_and_leaves_them_there(pipeline, ops, capsys):
    run, _ = ops
    dead_letter_some(pipeline)
    code, out = run("--json", "dlq", "list", capsys=capsys)
    groups = {g["code"]: g for g in json.loads(out)}
    assert code == 0 and {c: g["count"] for c, g in groups.items()} == {"invalid-message": 3, "ses-refused": 2}
    assert "MessageRejected" in groups["ses-refused"]["sample_reason"]
    assert len(pipeline.dead_letters()) == 5  # listing read them, then made them visible again


def test_dlq_redrive_by_reason_moves_only_those(pipeline, ops, capsys):
    run, queue_url = ops
    dead_letter_some(pipeline)
    code, out = run("dlq", "redrive", "--reason", "ses-refused", capsys=capsys)
    assert code == 0 and "moved 2 messages" in out and "3 left in the DLQ" in out
    moved = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                                MessageAttributeNames=["All"])["Messages"]
    assert sorted(json.loads(m["Body"])["dedupeKey"] for m in moved) == ["k:refused0", "k:refused1"]
    assert all(not name.startswith("sendonce.") for m in moved for name in m.get("MessageAttributes", {}))
    assert len(pipeline.dead_letters()) == 3


def test_dlq_redrive_of_one_key_moves_only_its_dead_letters(pipeline, ops, capsys):
    run, queue_url = ops
    dead_letter_some(pipeline)
    code, out = run("dlq", "redrive", "--key", "k:refused1", capsys=capsys)
    assert code == 0 and "moved 1 messages" in out and "4 left in the DLQ" in out
    [moved] = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert json.loads(moved["Body"])["dedupeKey"] == "k:refused1"
    code, _ = run("dlq", "redrive", "--key", "k:nowhere")
    assert code == 2 and "no dead letter has key k:nowhere" in capsys.readouterr().err
    assert len(pipeline.dead_letters()) == 4


def test_dlq_redrive_of_invalid_messages_is_refused_without_force_since_they_would_come_straight_back(
        pipeline, ops, capsys):
    run, _ = ops
    dead_letter_some(pipeline)
    code, _ = run("dlq", "redrive", "--reason", "invalid-message")
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "would come straight back to the DLQ" in err, err
    code, out = run("dlq", "redrive", "--reason", "invalid-message", "--force", capsys=capsys)
    assert code == 0 and "moved 3 messages back to the job queue; 2 left in the DLQ" in out


def test_dlq_redrive_of_everything_falls_back_to_copying_where_there_is_no_move_task(pipeline, ops, capsys):
    run, _ = ops
    dead_letter_some(pipeline)
    code, out = run("dlq", "redrive", "--force", capsys=capsys)
    assert code == 0 and "moved 5 messages" in out and "no message-move task" in out
    assert pipeline.dead_letters() == []


def test_dlq_redrive_of_everything_uses_the_sqs_message_move_task_on_aws():
    sqs = boto3.client("sqs", region_name="us-east-1")
    stub = Stubber(sqs)
    for arn in ("arn:aws:sqs:us-east-1:1:dlq", "arn:aws:sqs:us-east-1:1:jobs"):
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": arn}})
    stub.add_response("start_message_move_task", {"TaskHandle": "task-1"},
                      {"SourceArn": "arn:aws:sqs:us-east-1:1:dlq", "DestinationArn": "arn:aws:sqs:us-east-1:1:jobs"})
    with stub:
        result = DeadLetters(sqs, "https://sqs/1/dlq", "https://sqs/1/jobs").redrive(force=True)
    assert result.native_task == "task-1"


def test_a_redrive_killed_between_copy_and_delete_loses_nothing_and_sends_once(pipeline, ops):
    _, queue_url = ops
    clock = FakeClock()
    sqs = boto3.client("sqs")
    # A job that failed for a reason now fixed: it sits in the DLQ, unsent.
    sqs.send_message(QueueUrl=pipeline.dead_letter_queue_url, MessageBody=json.dumps(job("k:redriven")))
    dead = DeadLetters(sqs, pipeline.dead_letter_queue_url, queue_url)

    held = []

    def killed(message):
        held.append(message["ReceiptHandle"])
        raise KeyboardInterrupt("operator's laptop closed")

    with pytest.raises(KeyboardInterrupt):
        dead.redrive(limit=1, after_copy=killed, dedupe_ttl_s=DEDUPE_TTL_S)
    # The killed redrive's hold on the DLQ message runs out, as it would after 30 s.
    sqs.change_message_visibility(QueueUrl=pipeline.dead_letter_queue_url, ReceiptHandle=held[0], VisibilityTimeout=0)
    assert dead.redrive(limit=1, dedupe_ttl_s=DEDUPE_TTL_S).moved == 1
    jobs = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert len(jobs) == 2  # the copy made before the kill, and the second redrive's
    consumer = pipeline.consumer(clock)
    for message in jobs:
        consumer.handle(event(sqs_record(message["Body"])), FakeContext(clock))
    assert pipeline.emails_for("k:redriven") == 1


def dead_letter_times(pipeline) -> list[int]:
    """When SQS stamped each message now in the DLQ (read from the emulator, without receiving them)."""
    from moto.sqs.models import sqs_backends

    backend = sqs_backends[pipeline.aws.account_id][pipeline.aws.region]
    queue = backend.queues[pipeline.dead_letter_queue_url.rsplit("/", 1)[-1]]
    return [int(message.sent_timestamp) for message in queue._messages]


def operator_clock_at(monkeypatch, now_ms: int) -> None:
    monkeypatch.setattr(dead_letters_module, "_now_ms", lambda: now_ms)


def test_dlq_redrive_skips_and_lists_jobs_dead_lettered_longer_ago_than_dedupe_ttl(pipeline, ops, capsys,
                                                                                  monkeypatch):
    run, queue_url = ops
    dead_letter_some(pipeline)
    oldest_fresh_ms = max(dead_letter_times(pipeline)) + 1
    while time.time_ns() // 1_000_000 < oldest_fresh_ms:  # the clock moves on by a millisecond at most
        pass
    boto3.client("sqs").send_message(QueueUrl=pipeline.dead_letter_queue_url, MessageBody=json.dumps(job("k:fresh")))
    # The operator redrives when the fresh one is exactly dedupe_ttl old: the five before it are older.
    operator_clock_at(monkeypatch, max(dead_letter_times(pipeline)) + DEDUPE_TTL_S * 1000)
    code, out = run("dlq", "redrive", capsys=capsys)
    assert code == 0 and "skipped 5 dead-lettered longer ago than dedupe_ttl (604800 s)" in out, out
    assert "then --force" in out and "k:refused0" in out and "ses-refused" in out and "days in DLQ" in out
    assert "moved 1 messages" in out
    moved = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"])["dedupeKey"] for m in moved] == ["k:fresh"]
    assert len(pipeline.dead_letters()) == 5  # left where they were


def test_dlq_redrive_force_moves_the_forgotten_too(pipeline, ops, capsys, monkeypatch):
    run, _ = ops
    dead_letter_some(pipeline)
    operator_clock_at(monkeypatch, max(dead_letter_times(pipeline)) + 8 * 86_400_000)
    code, out = run("--json", "dlq", "redrive", "--force", capsys=capsys)
    assert code == 0 and json.loads(out)["moved"] == 5 and json.loads(out)["forgotten"] == []
    assert pipeline.dead_letters() == []


def test_dlq_redrive_without_a_known_dedupe_ttl_is_refused_in_one_line(pipeline, capsys):
    dead_letter_some(pipeline)
    queue_url = boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"]
    code = sendonce(["--queue", queue_url, "--dlq", pipeline.dead_letter_queue_url, "dlq", "redrive"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "pass --stack or --dedupe-ttl SECONDS, or --force" in err
    assert len(pipeline.dead_letters()) == 5


TEMPLATE_WITH_OUTPUTS = {
    "Resources": {
        "ReceiptsDedupeTable1": {"Type": "AWS::DynamoDB::Table", "Properties": {
            "KeySchema": [{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "dedupeKey", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST"}},
        "ReceiptsQueue1": {"Type": "AWS::SQS::Queue"},
        "ReceiptsDeadLetterQueue1": {"Type": "AWS::SQS::Queue"},
    },
}


def test_a_stack_is_found_by_its_outputs_or_its_resources(aws, capsys):
    cloudformation = boto3.client("cloudformation")
    with_outputs = dict(TEMPLATE_WITH_OUTPUTS, Outputs={
        "T": {"Value": {"Ref": "ReceiptsDedupeTable1"}, "Description": "sendonce:Shop/Receipts:table"},
    })
    cloudformation.create_stack(StackName="WithOutputs", TemplateBody=json.dumps(with_outputs))
    cloudformation.create_stack(StackName="ResourcesOnly", TemplateBody=json.dumps(TEMPLATE_WITH_OUTPUTS))
    for stack in ("WithOutputs", "ResourcesOnly"):
        assert sendonce(["--stack", stack, "status", "k:any"]) == 0
        assert "never seen" in capsys.readouterr().out


def test_the_stack_outputs_give_the_dedupe_ttl_and_the_key_secret(aws):
    from sendonce_ops.locate import locate

    cloudformation = boto3.client("cloudformation")
    outputs = {"T": {"Value": {"Ref": "ReceiptsDedupeTable1"}, "Description": "sendonce:Shop/Receipts:table"},
               "Ttl": {"Value": "86400", "Description": "sendonce:Shop/Receipts:dedupe-ttl"},
               "Key": {"Value": "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf",
                       "Description": "sendonce:Shop/Receipts:key-secret"}}
    cloudformation.create_stack(StackName="Private", TemplateBody=json.dumps(dict(TEMPLATE_WITH_OUTPUTS,
                                                                                  Outputs=outputs)))
    found = locate(cloudformation, "Private", None, None, None, None)
    assert found.dedupe_ttl_s == 86_400 and found.key_secret.endswith(":secret:keys-AbCdEf")


def test_info_shows_every_name_a_producer_needs_from_the_stacks_outputs_or_its_resources(aws, capsys):
    cloudformation = boto3.client("cloudformation")
    parts = {"table": {"Ref": "ReceiptsDedupeTable1"}, "queue": {"Ref": "ReceiptsQueue1"},
             "dlq": {"Ref": "ReceiptsDeadLetterQueue1"}, "urgent-queue": "https://sqs.local/1/urgent",
             "urgent-dlq": "https://sqs.local/1/urgent-dlq", "outbox": "shop-outbox",
             "attachments": {"Ref": "ReceiptsAttachmentsBucket1"},
             "key-secret": "arn:aws:secretsmanager:us-east-1:123456789012:secret:keys-AbCdEf",
             "dedupe-ttl": "86400", "evidence-grace": "300"}
    template = {"Resources": {**TEMPLATE_WITH_OUTPUTS["Resources"],
                              "ReceiptsAttachmentsBucket1": {"Type": "AWS::S3::Bucket"}}}
    outputs = {f"O{n}": {"Value": value, "Description": f"sendonce:Shop/Receipts:{part}"}
               for n, (part, value) in enumerate(parts.items())}
    cloudformation.create_stack(StackName="Everything", TemplateBody=json.dumps(dict(template, Outputs=outputs)))
    cloudformation.create_stack(StackName="Bare", TemplateBody=json.dumps(template))
    bucket = next(r["PhysicalResourceId"] for r in cloudformation.describe_stack_resources(
        StackName="Bare")["StackResources"] if r["ResourceType"] == "AWS::S3::Bucket")

    assert sendonce(["--stack", "Everything", "--json", "info"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["attachmentsBucket"] and shown["urgentQueueUrl"] == "https://sqs.local/1/urgent"
    assert shown["urgentDeadLetterQueueUrl"] == "https://sqs.local/1/urgent-dlq"
    assert shown["outboxTable"] == "shop-outbox"
    assert shown["keySecretArn"].endswith(":secret:keys-AbCdEf") and shown["dedupeTtlSeconds"] == 86_400
    assert sendonce(["--stack", "Everything", "info"]) == 0
    text = capsys.readouterr().out
    for label, value in (("attachments bucket", shown["attachmentsBucket"]),
                         ("urgent queue", "https://sqs.local/1/urgent"), ("key secret", shown["keySecretArn"]),
                         ("dedupe ttl", "86400 s"), ("evidence grace period", "300 s")):
        assert re.search(rf"^{label}\s+{re.escape(value)}$", text, re.MULTILINE), (label, text)

    # A stack whose outputs the endpoint does not return: the bucket is found among its resources.
    assert sendonce(["--stack", "Bare", "info"]) == 0
    assert re.search(rf"^attachments bucket\s+{re.escape(bucket)}$", capsys.readouterr().out, re.MULTILINE)


def test_a_wrong_stack_or_a_missing_table_is_a_clear_error(aws, capsys):
    assert sendonce(["--stack", "NoSuchStack", "status", "k"]) == 2
    assert "stack 'NoSuchStack' not found" in capsys.readouterr().err
    assert sendonce(["status", "k"]) == 2
    assert "no table found: pass --table or --stack" in capsys.readouterr().err
    assert sendonce(["--table", "missing", "status", "k"]) == 2
    assert "ResourceNotFoundException" in capsys.readouterr().err


def test_status_shows_what_ses_said_and_doubles_lists_keys_sent_twice(pipeline, ops, capsys):
    from ses_event_fixtures import ses_event, sqs_records

    from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings

    run, _ = ops
    clock = FakeClock()
    record_states(pipeline, clock)
    dlq = boto3.client("sqs").create_queue(QueueName="evidence-dlq")["QueueUrl"]
    recorder = EventRecorder.from_clients(RecorderSettings(pipeline.table_name, dlq), boto3.client("dynamodb"),
                                          boto3.client("sqs"), clock, EventLog(io.StringIO()))
    recorder.handle(sqs_records(ses_event("Send", "k:stale", "ses-1"), ses_event("Bounce", "k:stale", "ses-1"),
                                ses_event("Send", "k:sent", "ses-a"), ses_event("Delivery", "k:sent", "ses-b")))

    code, out = run("status", "k:stale", capsys=capsys)
    assert code == 0 and "SENT" in out and "ses-1" in out and "bounced" in out and "Permanent/General" in out
    code, out = run("unknown", capsys=capsys)
    assert "k:stale" not in out and "k:unknown" in out  # SES's evidence settled the dead worker's send
    code, out = run("doubles", capsys=capsys)
    assert code == 0 and "k:sent" in out and "ses-a, ses-b" in out and "k:stale" not in out
    assert sendonce(["--json", "--table", pipeline.table_name, "doubles"]) == 0
    [double] = json.loads(capsys.readouterr().out)
    assert double["key"] == "k:sent" and double["ses_message_ids"] == ["ses-a", "ses-b"]
