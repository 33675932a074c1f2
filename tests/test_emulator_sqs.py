"""The emulator's SQS under concurrent pollers, as Lambda's event source has them: no message handed out twice,
no error of the emulator's own (moto's backend, unserialised, raised `list.remove(x): x not in list`)."""

from __future__ import annotations

import threading
from collections import Counter

import boto3


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
