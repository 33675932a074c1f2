"""The outbox relay reports what SQS did not take by sequence number, so the stream retries from there."""

from __future__ import annotations

import boto3
from botocore.stub import Stubber

from sendonce_runtime.outbox_relay import relay


def stream_record(n: int, event_name: str = "INSERT") -> dict:
    return {"eventName": event_name, "dynamodb": {"SequenceNumber": str(100 + n), "NewImage": {
        "dedupeKey": {"S": f"order-{n}"}, "job": {"S": f'{{"dedupeKey": "order-{n}"}}'}}}}


def test_only_inserts_are_relayed_and_refused_entries_are_reported_in_order():
    sqs = boto3.client("sqs", region_name="us-east-1")
    stub = Stubber(sqs)
    stub.add_response("send_message_batch", {
        "Successful": [{"Id": "0", "MessageId": "m0", "MD5OfMessageBody": "x"}],
        "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError"}],
    }, {"QueueUrl": "q", "Entries": [{"Id": "0", "MessageBody": '{"dedupeKey": "order-0"}'},
                                     {"Id": "1", "MessageBody": '{"dedupeKey": "order-2"}'}]})
    with stub:
        failed = relay([stream_record(0), stream_record(1, "MODIFY"), stream_record(2)], sqs, "q", fifo=False)
    assert failed == ["102"]


def test_a_failed_call_reports_its_whole_chunk_and_fifo_gets_group_and_deduplication_ids():
    sqs = boto3.client("sqs", region_name="us-east-1")
    stub = Stubber(sqs)
    stub.add_client_error("send_message_batch", "ServiceUnavailable", http_status_code=503)
    with stub:
        assert relay([stream_record(0), stream_record(1)], sqs, "q.fifo", fifo=True) == ["100", "101"]
    sent = []
    sqs2 = boto3.client("sqs", region_name="us-east-1")
    sqs2.meta.events.register("before-parameter-build.sqs.SendMessageBatch", lambda params, **_: sent.append(params))
    stub2 = Stubber(sqs2)
    stub2.add_response("send_message_batch", {"Successful": [], "Failed": []})
    with stub2:
        relay([stream_record(5)], sqs2, "q.fifo", fifo=True)
    [entry] = sent[0]["Entries"]
    assert entry["MessageGroupId"] == "order-5" and len(entry["MessageDeduplicationId"]) == 64


def test_a_job_gets_the_same_fifo_group_enqueued_or_relayed_and_a_deduplication_id_per_sending():
    """SQS drops a retry of one sending (a relay's retry of the same stream record), never a job enqueued again on
    purpose: each enqueue and each new outbox item is a sending of its own."""
    from sendonce_contract.fifo import deduplication_id
    from sendonce_producer import EmailJob, outbox_put
    from sendonce_producer.enqueue import message_request

    job = EmailJob(dedupe_key="order-7:shipped", sender="shop@example.com", to=["Ada <Ada@Example.ORG>", "b@x.org"],
                   subject="Shipped", text="On its way")
    for group in (None, "order-7"):
        values = outbox_put("outbox", job, group_id=group)["Update"]["ExpressionAttributeValues"]
        image = {"dedupeKey": {"S": job.dedupe_key}, **{name[1:]: value for name, value in values.items()}}
        sent: list = []
        sqs = boto3.client("sqs", region_name="us-east-1")
        sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch",
                                 lambda params, sent=sent, **_: sent.append(params))
        with Stubber(sqs) as stub:
            stub.add_response("send_message_batch", {"Successful": [], "Failed": []})
            relay([{"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1", "NewImage": image}}], sqs, "q.fifo",
                  fifo=True)
        [relayed] = sent[0]["Entries"]
        enqueued = message_request(job, "q.fifo", group)
        assert relayed["MessageGroupId"] == enqueued["MessageGroupId"] == (group or "Ada@example.org")
        assert relayed["MessageDeduplicationId"] == deduplication_id(job.dedupe_key, "outbox item 1")
        again = message_request(job, "q.fifo", group)
        assert len({relayed["MessageDeduplicationId"], enqueued["MessageDeduplicationId"],
                    again["MessageDeduplicationId"]}) == 3
