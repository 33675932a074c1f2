"""The producer refuses a job larger than its queue takes before it is sent, naming its size, the limit and the fix;
the limit is the queue's own (read from it) or the one given; batches are sized so SQS takes each whole."""

from __future__ import annotations

import random
import uuid
from collections import Counter

import boto3
import pytest

from sendonce_contract.sqs_limits import SQS_MAX_BATCH_BYTES, SQS_MAX_MESSAGE_BYTES
from sendonce_producer import (
    Attachment,
    AttachmentStore,
    EmailJob,
    InvalidJob,
    JobTooLarge,
    Pipeline,
    enqueue,
    enqueue_many,
)

SENDER = "Shop <receipts@example.com>"
BUCKET = "shop-attachments"


def invoice(size: int) -> Attachment:
    return Attachment.from_bytes(random.Random(size).randbytes(size), "invoice-8891.pdf")


def receipt(key: str, *files: Attachment, html: str = "<p>Thanks</p>") -> EmailJob:
    return EmailJob(key, SENDER, ["ada@example.org"], subject="Receipt", html=html, attachments=files)


def queue(max_bytes: int | None = None) -> str:
    """A queue of its own name (the producer keeps each queue's limit by its URL)."""
    attributes = {"MaximumMessageSize": str(max_bytes)} if max_bytes else {}
    return boto3.client("sqs").create_queue(QueueName=f"jobs-{uuid.uuid4().hex[:8]}",
                                            Attributes=attributes)["QueueUrl"]


def waiting(url: str) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def counted(client) -> Counter[str]:
    calls: Counter[str] = Counter()
    client.meta.events.register("before-send.sqs.*", lambda event_name, **_: calls.update([event_name.split(".")[-1]]))
    return calls


def test_a_job_larger_than_its_queue_takes_is_refused_unsent_naming_its_size_the_limit_and_the_fix(aws):
    url, sqs = queue(65_536), boto3.client("sqs")
    calls = counted(sqs)
    job = receipt("receipt:big:1", invoice(100 * 1024))
    size = len(job.to_message().encode())
    with pytest.raises(JobTooLarge) as refused:
        enqueue(url, job, sqs=sqs)
    message = str(refused.value)
    assert isinstance(refused.value, InvalidJob) and (refused.value.size_bytes, refused.value.limit_bytes) == (
        size, 65_536)
    assert f"'receipt:big:1': the job's message is {size:,} bytes, over the queue's maximum message size of 65,536 " \
           "bytes; nothing was sent" in message
    assert "attachments bucket" in message and "AttachmentStore" in message
    assert f"max_message_size_bytes (up to {SQS_MAX_MESSAGE_BYTES:,})" in message
    assert calls["SendMessage"] == 0 and waiting(url) == 0

    # All or none: a batch with one job too large sends none of them.
    with pytest.raises(JobTooLarge, match="receipt:big:1"):
        enqueue_many(url, [receipt("receipt:small:1"), job], sqs=sqs)
    assert calls["SendMessageBatch"] == 0 and waiting(url) == 0


def test_with_the_attachments_bucket_the_same_job_is_sent_and_the_fix_names_what_is_left(aws):
    url, s3 = queue(65_536), boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    enqueue(url, receipt("receipt:big:2", invoice(100 * 1024)), attachments=AttachmentStore(BUCKET, s3))
    assert waiting(url) == 1  # its file went to the bucket; the job carries the reference

    keeps_it_inline = Pipeline(queue_url=url, table_name="dedupe", attachments_bucket=BUCKET, s3=s3,
                               attachment_inline_limit_bytes=200 * 1024)
    with pytest.raises(JobTooLarge, match="lower inline_limit_bytes so more of them go there"):
        keeps_it_inline.enqueue(receipt("receipt:big:3", invoice(100 * 1024)))
    with pytest.raises(JobTooLarge, match="Shorten its content, or deploy the queue with a larger"):
        enqueue(url, receipt("receipt:long", html="<p>" + "x" * 70_000 + "</p>"))
    assert waiting(url) == 1


def test_the_limit_is_read_from_the_queue_once_and_again_before_a_job_is_refused(aws):
    url, sqs = queue(65_536), boto3.client("sqs")
    calls = counted(sqs)
    big = receipt("receipt:big:4", invoice(100 * 1024))
    enqueue(url, receipt("receipt:mid:1", invoice(10 * 1024)), sqs=sqs)
    enqueue(url, receipt("receipt:mid:2", invoice(10 * 1024)), sqs=sqs)
    assert calls["GetQueueAttributes"] == 1  # read once, then kept for the jobs it lets through
    with pytest.raises(JobTooLarge):
        enqueue(url, big, sqs=sqs)
    assert calls["GetQueueAttributes"] == 2  # read again before refusing
    # A redeploy raised the queue's limit: the same job is sent, no restart needed.
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MaximumMessageSize": "262144"})
    enqueue(url, big, sqs=sqs)
    assert waiting(url) == 3


def test_a_given_limit_is_used_without_reading_the_queue(aws):
    url, sqs = queue(), boto3.client("sqs")
    calls = counted(sqs)
    with pytest.raises(JobTooLarge, match="maximum message size of 65,536 bytes"):
        Pipeline(queue_url=url, table_name="dedupe", sqs=sqs, max_message_size_bytes=65_536).enqueue_many(
            [receipt("receipt:big:5", invoice(100 * 1024))])
    assert calls["GetQueueAttributes"] == 0 and calls["SendMessageBatch"] == 0


def test_a_job_over_sqss_largest_message_names_no_larger_queue(aws):
    url = queue(SQS_MAX_MESSAGE_BYTES)
    with pytest.raises(JobTooLarge) as refused:
        enqueue(url, receipt("receipt:huge", invoice(800 * 1024)))
    assert "max_message_size_bytes" not in str(refused.value) and "attachments bucket" in str(refused.value)


def test_enqueue_many_sends_batches_sqs_takes_whole(aws):
    url, sqs = queue(SQS_MAX_MESSAGE_BYTES), boto3.client("sqs")
    entries: list[int] = []
    sqs.meta.events.register("before-parameter-build.sqs.SendMessageBatch",
                             lambda params, **_: entries.append(sum(len(e["MessageBody"].encode())
                                                                    for e in params["Entries"])))
    jobs = [receipt(f"receipt:batch:{n}", invoice(60 * 1024)) for n in range(10)]
    assert enqueue_many(url, jobs, sqs=sqs) == []
    assert len(entries) == 4 and max(entries) <= SQS_MAX_BATCH_BYTES  # three ~82 KB bodies a batch, not ten
    assert waiting(url) == 10


def test_a_producer_that_may_not_read_the_queue_sends_as_before_and_tries_the_read_once(aws):
    url, sqs = queue(), boto3.client("sqs")
    tried: list[str] = []

    class Refused:
        status_code = 403

    def denied(**_):  # answers in SQS's place, as it answers a role granted SendMessage alone
        tried.append("GetQueueAttributes")
        return Refused(), {"Error": {"Code": "AccessDenied", "Message": "not authorized"}}

    sqs.meta.events.register("before-call.sqs.GetQueueAttributes", denied)
    enqueue(url, receipt("receipt:mid:3", invoice(10 * 1024)), sqs=sqs)
    enqueue(url, receipt("receipt:mid:4", invoice(10 * 1024)), sqs=sqs)
    assert tried == ["GetQueueAttributes"] and waiting(url) == 2
    with pytest.raises(JobTooLarge, match=f"maximum message size of {SQS_MAX_MESSAGE_BYTES:,} bytes"):
        enqueue(url, receipt("receipt:huge:2", invoice(800 * 1024)), sqs=sqs)  # over any queue's limit
