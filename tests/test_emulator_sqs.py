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
