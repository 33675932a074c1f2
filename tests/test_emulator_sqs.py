"""The emulator's SQS under concurrent pollers, as Lambda's event source has them: no message handed out twice,
no error of the emulator's own (moto's backend, unserialised, raised `list.remove(x): x not in list`)."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from serve_process import served


def test_concurrent_receives_and_deletes_hand_each_message_out_once_without_errors(aws):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="busy")["QueueUrl"]
    for start in range(0, 200, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(start + i)}
                                                      for i in range(10)])
    received: Counter[str] = Counter()
    errors: list[Exception] = []
    lock = threading.Lock()

    def poll() -> None:
        client = boto3.client("sqs")
        try:
            while True:
                messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=120,
                                                  WaitTimeSeconds=0).get("Messages", [])
                if not messages:
                    return
                with lock:
                    received.update(m["Body"] for m in messages)
                client.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)])
        except Exception as error:  # any error fails the test below
            errors.append(error)

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(received) == 200 and set(received.values()) == {1}


def test_a_receive_reads_no_whole_queue_per_message(aws, monkeypatch):
    """moto checked each received message's retention by computing every attribute of its queue (three passes over
    all its messages), so one receive from a queue of n messages cost O(n^2): a demo's few hundred waiting jobs
    slowed each call past the consumer's timeouts. A receive now reads the queue's own retention field."""
    from moto.sqs.models import Queue

    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="deep")["QueueUrl"]
    for start in range(0, 100, 10):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": str(start + i)}
                                                      for i in range(10)])
    computed: list[str] = []
    whole = Queue.attributes

    def counted(queue: Queue) -> dict:
        computed.append(queue.name)
        return whole.fget(queue)  # type: ignore[attr-defined]

    monkeypatch.setattr(Queue, "attributes", property(counted))
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)["Messages"]
    assert len(messages) == 10
    assert computed == []


def test_the_emulator_counts_each_queues_requests_apart(aws):
    """A burst's pacing cost is its job queue's requests, told apart from the stack's other queues'."""
    from sendonce_local.emulator.request_counts import REQUESTS

    sqs = boto3.client("sqs")
    jobs, evidence = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("counted-jobs", "counted-evidence"))
    before = REQUESTS.queue_snapshot()
    sqs.send_message(QueueUrl=jobs, MessageBody="a job")
    sqs.receive_message(QueueUrl=jobs, WaitTimeSeconds=0)
    sqs.receive_message(QueueUrl=evidence, WaitTimeSeconds=0)
    counted = REQUESTS.queue_snapshot() - before
    assert counted == Counter({("counted-jobs", "SendMessage"): 1, ("counted-jobs", "ReceiveMessage"): 1,
                               ("counted-evidence", "ReceiveMessage"): 1})


# A message attribute as SQS counts it: its name ("k", 1 byte), its data type ("String", 6) and its value ("v", 1).
LABEL = {"k": {"DataType": "String", "StringValue": "v"}}


def refusal(call) -> tuple[str, str]:
    """The error code and message SQS answered ``call`` with."""
    with pytest.raises(ClientError) as refused:
        call()
    return refused.value.response["Error"]["Code"], refused.value.response["Error"]["Message"]


def test_a_message_counts_its_body_in_utf8_bytes_and_every_attribute_toward_the_queues_maximum_size(aws):
    """moto compared the body's length in characters alone: a copy whose attributes took it past the queue's limit
    was accepted, and SQS refuses it."""
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="sized", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1016, MessageAttributes=LABEL)  # 1,024 bytes in all
    assert refusal(lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * 1017, MessageAttributes=LABEL)) == (
        "InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than 1024 bytes.")
    sqs.send_message(QueueUrl=url, MessageBody="é" * 512)  # 512 characters, 1,024 bytes
    assert refusal(lambda: sqs.send_message(QueueUrl=url, MessageBody="é" * 513))[0] == "InvalidParameterValue"
    binary = {"b": {"DataType": "Binary", "BinaryValue": bytes(17)}}  # 1 + 6 + 17 bytes
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1000, MessageAttributes=binary)
    assert refusal(lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * 1001, MessageAttributes=binary))

    # In a batch, an entry over the limit fails alone, blamed on the sender; the others are taken.
    answer = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "fits", "MessageBody": "x" * 1016, "MessageAttributes": LABEL},
        {"Id": "over", "MessageBody": "é" * 509, "MessageAttributes": LABEL}])
    assert [entry["Id"] for entry in answer["Successful"]] == ["fits"]
    assert answer["Failed"] == [{"Id": "over", "SenderFault": True, "Code": "InvalidParameterValue",
                                 "Message": "One or more parameters are invalid. Reason: Message must be shorter "
                                            "than 1024 bytes."}]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "4"


def test_a_batch_whose_messages_and_attributes_total_over_one_mib_is_refused_whole(aws):
    sqs = boto3.client("sqs")
    url = sqs.create_queue(QueueName="sized-batch", Attributes={"MaximumMessageSize": "1048576"})["QueueUrl"]
    halves = [{"Id": str(n), "MessageBody": "x" * 524_288, "MessageAttributes": LABEL} for n in range(2)]
    code, message = refusal(lambda: sqs.send_message_batch(QueueUrl=url, Entries=halves))  # 8 bytes over 1 MiB
    assert code.endswith("BatchRequestTooLong") and "1048592" in message
    halves[1]["MessageBody"] = "x" * 524_272
    assert len(sqs.send_message_batch(QueueUrl=url, Entries=halves)["Successful"]) == 2  # 1 MiB exactly


def test_an_emulator_in_its_own_process_counts_attributes_toward_a_messages_size(tmp_path: Path):
    with served(tmp_path / "stderr.txt") as (_, exports):
        sqs = boto3.client("sqs", endpoint_url=exports["AWS_ENDPOINT_URL"], region_name=exports["AWS_REGION"],
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        url = sqs.create_queue(QueueName="served-sized", Attributes={"MaximumMessageSize": "1024"})["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1016, MessageAttributes=LABEL)
        assert refusal(lambda: sqs.send_message(QueueUrl=url, MessageBody="x" * 1017, MessageAttributes=LABEL))[
            0] == "InvalidParameterValue"
