"""One schema for every part: what the runtime writes, the producer writes, the operator command and the local report
read, and no part spells a ledger, dead-letter or outbox name, or a reason code, of its own."""

from __future__ import annotations

import ast
import io
import re
from pathlib import Path

import boto3
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from layout import PACKAGES
from ses_event_fixtures import OWN_OBJECTS, ses_event, sqs_records

from sendonce_constructs import DeliveryPolicy as ConstructPolicy
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.message import parse_job
from sendonce_contract.schema import (
    IGNORED_SES_EVENT_TYPES,
    SES_EVENT_TYPES,
    DeadLetter,
    Ledger,
    OutboxItem,
    ReasonCode,
    Status,
)
from sendonce_local.demo import report_build as report
from sendonce_ops.dead_letters import DeadLetters
from sendonce_ops.ledger_view import LedgerView
from sendonce_producer import EmailJob, outbox_put
from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings
from sendonce_runtime.outbox_relay import relay

ROOT = Path(__file__).resolve().parents[1]
LEDGER_NAMES = {v for k, v in vars(Ledger).items() if k.isupper()}
DEAD_LETTER_NAMES = {v for k, v in vars(DeadLetter).items() if k.isupper() and k != "PREFIX"}
OUTBOX_NAMES = {v for k, v in vars(OutboxItem).items() if k.isupper()}
REASON_CODES = {code.value for code in ReasonCode}


def test_what_the_consumer_and_the_recorder_write_the_operator_command_and_the_report_read(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, delivery=DeliveryPolicy.NEVER_RESEND, max_receive_count=3)
    ledger = consumer.processor._ledger
    ledger.claim("k:unknown", "dead", clock.now_ms() - 1, "h")  # a worker died mid-send
    ledger.claim("k:busy", "alive", clock.now_ms() + 600_000, "h")  # a copy in flight elsewhere
    consumer.handle(event(
        sqs_record(job("k:each")), sqs_record(job("k:double")), sqs_record(job("k:unknown")),
        sqs_record(job("k:busy"), receive_count=3), sqs_record("{oops"),
        sqs_record(job("k:refused", **{"from": "x@unverified.example.net"})),
    ), FakeContext(clock))
    evidence_dlq = boto3.client("sqs").create_queue(QueueName="evidence-dlq")["QueueUrl"]
    recorder = EventRecorder.from_clients(RecorderSettings(pipeline.table_name, evidence_dlq),
                                          boto3.client("dynamodb"), boto3.client("sqs"), clock, EventLog(io.StringIO()))
    each_id = pipeline.ledger_item("k:each")["sesMessageId"]["S"]  # SES's events carry the id SES answered with
    events = sqs_records(*(ses_event(kind, "k:each", each_id) for kind in OWN_OBJECTS),
                         ses_event("Send", "k:double", "ses-a"), ses_event("Delivery", "k:double", "ses-b"))
    events["Records"].append({**events["Records"][0], "messageId": "malformed", "body": "{not an event"})
    assert recorder.handle(events) == {"batchItemFailures": []}

    # The runtime writes no ledger attribute outside the schema.
    items = {key: pipeline.ledger_item(key) for key in ("k:each", "k:double", "k:unknown", "k:busy")}
    assert set().union(*items.values()) <= LEDGER_NAMES
    # The operator command reads every one of them.
    view = LedgerView(boto3.client("dynamodb"), pipeline.table_name, clock.now_ms)
    each = view.get("k:each")
    assert each is not None and each.status == Status.SENT.value and each.attempts == 1 and each.owner
    assert None not in (each.ses_message_id, each.claimed_at_ms, each.sent_at_ms, each.expires_at_s,
                        each.ses_accepted_at_ms, each.evidence_at_ms)
    assert each.ses_message_ids == (each_id,) and not each.double_send
    assert {what: detail for what, _, detail in each.outcomes} == {
        "delivered": "", "bounced": "Permanent/General", "complained": "abuse", "rejected": "Bad content",
        "delayed": "MailboxFull", "rendering failed": "Attribute 'attributeName' is not present in the rendering data."}
    assert [r.key for r in view.double_sends()] == ["k:double"]
    assert [r.key for r in view.needing_a_decision()] == ["k:unknown"]
    unknown = view.get("k:unknown")
    assert unknown is not None and unknown.status == Status.UNKNOWN.value and unknown.unknown_at_ms is not None
    busy = view.get("k:busy")
    assert busy is not None and busy.lease_expires_at_ms is not None
    # The local report reads them as the operator command does.
    records = report.ledger_records(pipeline.table_name, list(items))
    assert records["k:each"] == each and records["k:double"].double_send
    assert report._delivery_outcomes(records.values())["bounced (Permanent/General)"] == 1
    assert set(report._confirmation_ms(records.values())) == {"p50", "p90", "max"}

    # Every dead letter carries the schema's attributes and a reason code both readers group by.
    for queue_url, expected in ((pipeline.dead_letter_queue_url, {"invalid-message": 1, "ses-refused": 1,
                                                                  "max-receives": 1}),
                                (evidence_dlq, {"malformed-event": 1})):
        groups = DeadLetters(boto3.client("sqs"), queue_url).by_reason()
        assert {g.code: g.count for g in groups} == expected and set(expected) <= REASON_CODES
        assert all(g.sample_reason for g in groups)
        messages = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                                       MessageAttributeNames=["All"], VisibilityTimeout=0)["Messages"]
        assert {name for m in messages for name in m["MessageAttributes"]} <= DEAD_LETTER_NAMES
        reasons, _, _, keys = report._dead_letters(queue_url)
        assert dict(reasons) == expected
        if queue_url == pipeline.dead_letter_queue_url:
            assert {"k:busy", "k:refused"} <= keys


def test_what_the_producer_writes_to_the_outbox_the_relay_reads(aws):
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    dynamodb.create_table(TableName="outbox", BillingMode="PAY_PER_REQUEST",
                          KeySchema=[{"AttributeName": OutboxItem.KEY, "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": OutboxItem.KEY, "AttributeType": "S"}])
    job = EmailJob(dedupe_key="order-7:paid", sender="shop@example.com", to=["ada@example.org"], subject="Paid",
                   text="Thanks.")
    dynamodb.transact_write_items(TransactItems=[outbox_put("outbox", job, group_id="order-7")])
    item = dynamodb.get_item(TableName="outbox", Key={OutboxItem.KEY: {"S": job.dedupe_key}})["Item"]
    assert set(item) == OUTBOX_NAMES
    queue_url = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    assert relay([{"eventName": "INSERT", "dynamodb": {"NewImage": item, "SequenceNumber": "1"}}], sqs, queue_url,
                 fifo=True) == []
    [message] = sqs.receive_message(QueueUrl=queue_url, AttributeNames=["MessageGroupId"])["Messages"]
    assert message["Attributes"]["MessageGroupId"] == "order-7"
    assert parse_job(message["Body"], "m").dedupe_key == job.dedupe_key


def test_the_contract_s_event_types_are_ses_s_and_the_construct_s_policy_is_the_contract_s():
    # The fixtures follow the SES Developer Guide's examples, independently of the contract.
    assert {e.name: (e.detail_type, e.record_object) for e in SES_EVENT_TYPES} == {
        name: (detail_type, own) for name, (detail_type, own, _) in OWN_OBJECTS.items()}
    assert not IGNORED_SES_EVENT_TYPES & set(OWN_OBJECTS)
    assert ConstructPolicy is DeliveryPolicy


# SES's own field names, which the ledger keeps for what an event says: the local SES and the event parser
# spell them as SES does.
SES_FIELD_NAMES = {"bounceType", "bounceSubType", "complaintFeedbackType", "delayType"}
# Raw job documents, malformed ones included, are the local workload's and the test support's input: they spell the
# job's key field.
RAW_JOBS = {Path("local/sendonce_local/demo/workload.py"), Path("testing/sendonce_testing/lambda_events.py")}
SCANNED = [PACKAGES[package] for package in ("sendonce_runtime", "sendonce_producer", "sendonce_constructs",
                                             "sendonce_ops", "sendonce_local", "sendonce_testing")]


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants in ``path``, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_part_spells_a_schema_name_or_a_reason_code_of_its_own():
    # Plain words: read back above instead.
    generic = {Ledger.STATUS, Ledger.OWNER, Ledger.ATTEMPTS, Ledger.TENANT, OutboxItem.JOB}
    names = (LEDGER_NAMES | DEAD_LETTER_NAMES | OUTBOX_NAMES | REASON_CODES) - generic - SES_FIELD_NAMES
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(n)}(?![\w-])" for n in sorted(names, key=len,
                                                                                            reverse=True)))
    found = []
    for folder in SCANNED:
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(ROOT)
            for line, text in _literals(path):
                hits = set(pattern.findall(text))
                if relative in RAW_JOBS:
                    hits -= {Ledger.KEY}
                found += [f"{relative}:{line}: {hit!r}" for hit in sorted(hits)]
    assert found == [], "import these names from sendonce_contract.schema instead:\n" + "\n".join(found)
