"""The producer side: dedupe keys, validated jobs, enqueue helpers, the outbox, and its own small distribution."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from hypothesis import given
from hypothesis import strategies as st

from sendonce_constructs.runtime_asset import runtime_asset_dir
from sendonce_contract.companion_configs import RelayConfig
from sendonce_contract.message import parse_job
from sendonce_contract.release import __version__
from sendonce_producer import EmailJob, InvalidJob, dedupe_key, enqueue, enqueue_many, outbox_put
from sendonce_runtime.outbox_relay import relay

ROOT = Path(__file__).resolve().parents[1]
SENDER = "Shop <receipts@example.com>"


def receipt(key: str = "order-1042:shipped:ada@example.org", **overrides) -> EmailJob:
    fields = {"dedupe_key": key, "sender": SENDER, "to": ["ada@example.org"], "subject": "Shipped",
              "text": "On its way"}
    fields.update(overrides)
    return EmailJob(**fields)


# Parts of a valid key: no control characters, no white space that could end up at either end of the key.
parts = st.lists(st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=12),
                 min_size=1, max_size=4)


@given(parts, parts)
def test_distinct_parts_give_distinct_keys(a, b):
    if a != b:
        assert dedupe_key(*a) != dedupe_key(*b)


def test_the_separator_is_escaped_so_parts_cannot_run_together():
    assert dedupe_key("a:b", "c") != dedupe_key("a", "b:c")
    assert dedupe_key("a\\", ":b") != dedupe_key("a\\:", "b")


def test_the_recipient_part_is_normalised_but_its_local_part_kept():
    key = dedupe_key("order-1042", "shipped", recipient="Ada <Ada@Example.ORG>")
    assert key == "order-1042:shipped:Ada@example.org"


def test_bad_keys_are_refused_in_the_producer():
    with pytest.raises(ValueError, match="at least one part"):
        dedupe_key()
    with pytest.raises(ValueError, match="must not be empty"):
        dedupe_key("order", "")
    with pytest.raises(ValueError, match="the limit is 1024"):
        dedupe_key("x" * 1100)
    with pytest.raises(ValueError, match="not a valid email address"):
        dedupe_key("order", recipient="nobody")


def test_a_job_is_the_message_the_consumer_parses():
    job = receipt(to="ada@example.org", tags={"kind": "receipt"}, delivery="resend-without-evidence")
    parsed = parse_job(job.to_message(), "m")
    assert parsed.dedupe_key == job.dedupe_key and [m.address for m in parsed.to] == ["ada@example.org"]
    template = receipt(subject=None, text=None, template="shipped", template_data={"order": 1042})
    assert json.loads(template.to_message())["template"] == {"name": "shipped", "data": {"order": 1042}}


@pytest.mark.parametrize(("overrides", "reason"), [
    ({"to": []}, "0 recipients"),
    ({"sender": "not an address"}, "from 'not an address' is not a valid email address"),
    ({"text": None}, "needs html or text"),
    ({"template": "t"}, "exactly one of simple content"),
    ({"tags": {"bad tag": "x"}}, "SES's rule"),
    ({"delivery": "exactly-once"}, "delivery must be"),
])
def test_a_bad_job_raises_in_the_producer_with_the_reason(overrides, reason):
    with pytest.raises(InvalidJob, match=reason):
        receipt(**overrides)


def test_enqueue_sends_the_job_and_fifo_queues_get_a_group_and_deduplication_id(aws):
    sqs = boto3.client("sqs")
    standard = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    fifo = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    job = receipt(to=["Ada <Ada@Example.org>"])
    assert enqueue(standard, job)
    enqueue(fifo, job)
    enqueue(fifo, job)  # enqueued again on purpose (after `resolve --resend`): SQS's window must not drop it
    [message] = sqs.receive_message(QueueUrl=standard)["Messages"]
    assert message["Body"] == job.to_message()
    ordered = []
    for _ in range(2):
        [got] = sqs.receive_message(QueueUrl=fifo, MessageSystemAttributeNames=["All"])["Messages"]
        sqs.delete_message(QueueUrl=fifo, ReceiptHandle=got["ReceiptHandle"])
        ordered.append(got["Attributes"])
    assert {attributes["MessageGroupId"] for attributes in ordered} == {"Ada@example.org"}
    assert len({attributes["MessageDeduplicationId"] for attributes in ordered}) == 2


def test_a_scheduled_job_for_a_fifo_queue_raises_in_the_producer_and_nothing_is_sent(aws):
    from datetime import UTC, datetime, timedelta

    sqs = boto3.client("sqs")
    fifo = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    later = receipt("order-9:shipped", send_at=datetime.now(UTC) + timedelta(minutes=5))
    with pytest.raises(InvalidJob, match="'order-9:shipped': sendAt is refused on a FIFO queue"):
        enqueue(fifo, later)
    with pytest.raises(InvalidJob, match="schedule on a standard queue"):
        enqueue_many(fifo, [receipt("order-8:shipped"), later])
    assert "Messages" not in sqs.receive_message(QueueUrl=fifo)


def test_enqueue_many_sends_in_batches_of_ten(aws):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="many")["QueueUrl"]
    jobs = [receipt(f"order-{n}:shipped") for n in range(25)]
    calls = []
    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch",
                             lambda params, **_: calls.append(len(params["Entries"])))
    assert enqueue_many(url, jobs, sqs=sqs) == []
    assert calls == [10, 10, 5]


def test_enqueue_many_retries_sqs_failures_and_returns_what_still_failed():
    sqs = boto3.client("sqs", region_name="us-east-1")
    jobs = [receipt(f"order-{n}:shipped") for n in range(3)]
    url = "https://sqs.us-east-1.amazonaws.com/1/jobs"
    stub = Stubber(sqs)
    stub.add_response("send_message_batch", {"Successful": [], "Failed": [
        {"Id": "0", "SenderFault": False, "Code": "InternalError", "Message": "try again"},
        {"Id": "1", "SenderFault": True, "Code": "InvalidParameterValue", "Message": "your fault"},
        {"Id": "2", "SenderFault": False, "Code": "InternalError", "Message": "still down"},
    ]})
    stub.add_response("send_message_batch", {"Successful": [{"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "x"}],
                                             "Failed": [{"Id": "2", "SenderFault": False, "Code": "InternalError",
                                                         "Message": "still down"}]})
    stub.add_response("send_message_batch", {"Successful": [], "Failed": [
        {"Id": "2", "SenderFault": False, "Code": "InternalError", "Message": "still down"}]})
    with stub:
        failures = enqueue_many(url, jobs, sqs=sqs, retries=2, backoff_s=0)
    assert [(f.job.dedupe_key, f.code) for f in failures] == [
        ("order-1:shipped", "InvalidParameterValue"), ("order-2:shipped", "InternalError")]


def outbox_tables():
    dynamodb = boto3.client("dynamodb")
    for name, key in (("orders", "orderId"), ("outbox", "dedupeKey")):
        stream = {"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}}
        extra = stream if name == "outbox" else {}
        dynamodb.create_table(TableName=name, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST", **extra)
    return dynamodb


def order_transaction(order_id: str, status: str = "paid", **outbox_options) -> tuple[list[dict], EmailJob]:
    job = receipt(dedupe_key(order_id, "confirmed", recipient="ada@example.org"), subject=f"Receipt {order_id}")
    order = {"Put": {"TableName": "orders", "Item": {"orderId": {"S": order_id}, "status": {"S": status}}}}
    return [order, outbox_put("outbox", job, **outbox_options)], job


def outbox_records(dynamodb) -> list[dict]:
    streams = boto3.client("dynamodbstreams")
    stream_arn = dynamodb.describe_table(TableName="outbox")["Table"]["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    return streams.get_records(ShardIterator=iterator)["Records"]


def test_a_second_intent_for_the_same_key_never_cancels_the_business_transaction(aws):
    dynamodb = outbox_tables()
    first, job = order_transaction("order-7", status="paid")
    dynamodb.transact_write_items(TransactItems=first)
    again, _ = order_transaction("order-7", status="shipped")  # the order changed; its receipt key is the same
    dynamodb.transact_write_items(TransactItems=again)

    order = dynamodb.get_item(TableName="orders", Key={"orderId": {"S": "order-7"}})["Item"]
    assert order["status"]["S"] == "shipped"  # the business change committed
    item = dynamodb.get_item(TableName="outbox", Key={"dedupeKey": {"S": job.dedupe_key}})["Item"]
    assert item["job"]["S"] == job.to_message()
    # What the relay sends from the whole stream: the job once. (moto writes a transaction's Update of a new item
    # as two INSERTs, the key alone and then the whole item, and the unchanged second write as a MODIFY; real
    # DynamoDB writes one INSERT and nothing for an unchanged item. The relay is right for both.)
    sqs = boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    assert relay(outbox_records(dynamodb), sqs, queue_url, fifo=False) == []
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]]
    assert bodies == [job.to_message()]


def test_the_strict_form_cancels_the_transaction_on_a_duplicate_intent(aws):
    dynamodb = outbox_tables()
    transaction, job = order_transaction("order-8", fail_if_exists=True)
    dynamodb.transact_write_items(TransactItems=transaction)
    with pytest.raises(dynamodb.exceptions.TransactionCanceledException) as error:
        dynamodb.transact_write_items(TransactItems=order_transaction("order-8", "shipped", fail_if_exists=True)[0])
    assert [r["Code"] for r in error.value.response["CancellationReasons"]] == ["None", "ConditionalCheckFailed"]
    order = dynamodb.get_item(TableName="orders", Key={"orderId": {"S": "order-8"}})["Item"]
    assert order["status"]["S"] == "paid"
    assert dynamodb.get_item(TableName="outbox", Key={"dedupeKey": {"S": job.dedupe_key}})["Item"]["job"]["S"] \
        == job.to_message()


def test_an_order_through_the_outbox_sends_one_email_even_when_retried_and_relayed_twice(pipeline):
    from consumer_harness import FakeClock, FakeContext, event, sqs_record

    from sendonce_local.lambda_service.instances import FunctionSpec
    from sendonce_local.lambda_service.stream_source import StreamEventSourceRunner, StreamSourceSpec

    dynamodb, sqs = outbox_tables(), boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    stream_arn = dynamodb.describe_table(TableName="outbox")["Table"]["LatestStreamArn"]
    for order in ("order-1", "order-2"):
        transaction, _ = order_transaction(order)
        dynamodb.transact_write_items(TransactItems=transaction)
        dynamodb.transact_write_items(TransactItems=transaction)  # the client retried after a timeout: commits
    relay = FunctionSpec("relay", "sendonce_runtime.outbox_relay.handler", runtime_asset_dir(),
                         RelayConfig(queue_url).to_env(), timeout_s=10)
    for _ in range(2):  # a stream delivers at least once: relay the whole stream twice
        runner = StreamEventSourceRunner(relay, StreamSourceSpec(stream_arn, insert_only=True),
                                         pipeline.aws.environment).start()
        bound = 200
        while not (runner.idle() and runner.stats.invocations) and bound:
            bound -= 1
            runner._stop.wait(0.05)  # poll the runner's progress, bounded
        runner.stop()
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 4
    consumer = pipeline.consumer()
    for message in messages:
        consumer.handle(event(sqs_record(message["Body"])), FakeContext(FakeClock()))
    assert pipeline.emails_per_key() == {"order-1": 1, "order-2": 1}


def test_the_producer_distribution_carries_the_producer_only_and_never_imports_the_cdk(tmp_path):
    for project in (ROOT / "producer", ROOT / "contract"):
        subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path),
                        str(project)], check=True, capture_output=True)
    [wheel] = tmp_path.glob("sendonce_producer-*.whl")
    [contract] = tmp_path.glob("sendonce_contract-*.whl")
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist")]
    # boto3 and the contract stay the only required dependencies; the SQL outbox relay's drivers are extras.
    assert [line for line in requires if "extra ==" not in line] == [
        "Requires-Dist: boto3>=1.35", f"Requires-Dist: sendonce-contract=={__version__}"]
    assert sorted(line for line in requires if "extra ==" in line) == [
        "Requires-Dist: psycopg[binary]>=3.2; extra == 'postgresql'", "Requires-Dist: pymysql>=1.1; extra == 'mysql'"]
    assert {f"sendonce_producer/sql/{dialect}.sql" for dialect in ("postgresql", "mysql", "sqlite")} <= set(
        archive.namelist())
    packages = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert packages == {"sendonce_producer"}  # the contract comes as a dependency; no Lambda handler
    check = ("import sys, sendonce_producer; assert not [m for m in sys.modules if m.startswith('aws_cdk')]; "
             "assert 'sendonce_runtime' not in sys.modules")
    subprocess.run([sys.executable, "-c", check], check=True, cwd=tmp_path,
                   env={"PYTHONPATH": f"{wheel}:{contract}", "PATH": "/usr/bin:/bin"})


def test_the_stream_runner_keeps_reading_after_a_refused_transaction(pipeline):
    # moto rolls a failed transaction back by restoring copies of its tables, stream shard included: a reader
    # must not be stranded on the old shard (real DynamoDB keeps one shard; this guards the local runner).
    from sendonce_local.lambda_service.instances import FunctionSpec
    from sendonce_local.lambda_service.stream_source import StreamEventSourceRunner, StreamSourceSpec

    dynamodb, sqs = outbox_tables(), boto3.client("sqs")
    queue_url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
    stream_arn = dynamodb.describe_table(TableName="outbox")["Table"]["LatestStreamArn"]
    relay = FunctionSpec("relay", "sendonce_runtime.outbox_relay.handler", runtime_asset_dir(),
                         RelayConfig(queue_url).to_env(), timeout_s=10)
    runner = StreamEventSourceRunner(relay, StreamSourceSpec(stream_arn, insert_only=True),
                                     pipeline.aws.environment).start()
    try:
        for order in ("order-1", "order-2", "order-3"):
            transaction, _ = order_transaction(order, fail_if_exists=True)
            dynamodb.transact_write_items(TransactItems=transaction)
            with pytest.raises(dynamodb.exceptions.TransactionCanceledException):
                dynamodb.transact_write_items(TransactItems=transaction)
            bound = 200
            while runner.stats.records_delivered < int(order[-1]) and bound:  # let the runner read in between
                bound -= 1
                runner._stop.wait(0.05)
    finally:
        runner.stop()
    bodies = [json.loads(m["Body"])["dedupeKey"]
              for m in sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]]
    assert sorted(bodies) == ["order-1:confirmed:ada@example.org", "order-2:confirmed:ada@example.org",
                              "order-3:confirmed:ada@example.org"]
