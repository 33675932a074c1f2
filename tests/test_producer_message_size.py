"""The producer refuses a job larger than its queue takes before it is sent, naming its size, the limit and the fix;
the limit is the queue's own (read from it) or the one given; batches are sized so SQS takes each whole."""

from __future__ import annotations

import io
import json
import random
import uuid
from collections import Counter

import boto3
import pytest
from consumer_harness import SENDER_DOMAIN, FakeClock, FakeContext, event, failed_ids
from ses_fault_proxy import Fault
from slow_aws import Jobs

from sendonce_contract.copy_room import COPY_ATTRIBUTES_MAX_BYTES
from sendonce_contract.sqs_limits import SQS_MAX_BATCH_BYTES, SQS_MAX_MESSAGE_BYTES, message_bytes
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
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.redelivery import Redelivery
from sendonce_runtime.sqs_record import SqsRecord, carried_claims

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
    largest = refused.value.limit_bytes  # the queue's limit, less the room a delayed copy's attributes need
    assert isinstance(refused.value, InvalidJob) and refused.value.size_bytes == size and largest < 65_536
    assert f"'receipt:big:1': the job's message is {size:,} bytes, over the {largest:,} bytes a job may be: the " \
           "queue's maximum message size of 65,536 bytes, less" in message
    assert "(SQS counts them toward the limit); nothing was sent" in message
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


def padded(key: str, size: int) -> EmailJob:
    """A job whose message is exactly ``size`` bytes (its text padded), sent from the pipeline's identity."""
    def with_text(text: str) -> EmailJob:
        return EmailJob(key, f"Shop <receipts@{SENDER_DOMAIN}>", ["ada@example.org"], subject=f"Receipt {key}",
                        text=text)

    one = len(with_text("x").to_message().encode())
    return with_text("x" * (1 + size - one))


def sized_jobs(max_bytes: int) -> Jobs:
    """A job queue of its own name (the producer keeps each queue's limit by its URL) taking ``max_bytes``."""
    queue = Jobs(f"sized-{uuid.uuid4().hex[:8]}")
    queue.sqs.set_queue_attributes(QueueUrl=queue.url, Attributes={"MaximumMessageSize": str(max_bytes)})
    return queue


def test_a_job_at_the_largest_size_the_producer_accepts_is_copied_when_throttled_and_sent_once(
        pipeline, ses_faults):
    """SQS counts a message's attributes toward the queue's limit, and every delayed copy carries some (the
    receipt handle of the message it replaces among them): a job the producer let fill the queue's limit could
    never be copied, and each wait spent a receive. The producer leaves room for them."""
    queue = sized_jobs(65_536)
    with pytest.raises(JobTooLarge) as probe:  # what the producer takes at most, as it says
        enqueue(queue.url, padded("receipt:probe", 70_000))
    largest = probe.value.limit_bytes
    job = padded("receipt:full:1", largest)
    assert len(job.to_message().encode()) == largest
    enqueue(queue.url, job)
    [original] = queue.receive()
    consumer = pipeline.consumer(FakeClock(), queue_url=queue.url, max_receive_count=5)
    ses_faults.script(Fault.THROTTLE)
    response = consumer.handle(event(original), FakeContext(FakeClock()))
    queue.acknowledge(response, original)

    assert response == {"batchItemFailures": []}, "the delayed copy was refused: the original waits, a receive spent"
    [copy] = queue.receive()
    assert copy["body"] == original["body"]
    assert copy["messageAttributes"]["sendonce.supersedes"]["stringValue"] == original["receiptHandle"]
    queue.acknowledge(consumer.handle(event(copy), FakeContext(FakeClock())), copy)
    assert pipeline.emails_for("receipt:full:1") == 1 and pipeline.dead_letters() == [] and queue.depth() == 0

    # A job filling the queue's whole limit, which SQS itself would take, leaves no room: refused, unsent, saying so.
    with pytest.raises(JobTooLarge) as refused:
        enqueue(queue.url, padded("receipt:full:2", 65_536))
    # A receipt handle alone may be 1,024 characters (SQS's documented longest), under its name and type.
    assert refused.value.limit_bytes <= 65_536 - 1_024 - len("sendonce.supersedes") - len("String")
    message = str(refused.value)
    assert f"the job's message is 65,536 bytes, over the {refused.value.limit_bytes:,} bytes a job may be" in message
    assert "maximum message size of 65,536 bytes" in message and "delayed copies" in message
    assert queue.depth() == 0 and pipeline.emails_for("receipt:full:2") == 0


def test_a_job_too_large_to_copy_waits_by_its_visibility_and_says_why_until_it_is_dead_lettered(pipeline, ses_faults):
    """Another producer's raw SendMessage may fill the queue's limit: its copy is refused. The job then waits as on
    a FIFO queue (the message itself comes back, a receive spent), each wait's log line says why, and the last
    receive the queue allows dead-letters it with that reason, never silently."""
    queue = sized_jobs(65_536)
    queue.sqs.send_message(QueueUrl=queue.url, MessageBody=padded("receipt:raw:1", 65_536).to_message())
    consumer = pipeline.consumer(FakeClock(), queue_url=queue.url, max_receive_count=2)
    consumer.log = OutcomeLog(log := io.StringIO(), pipeline="Shop/Receipts")
    ses_faults.script(Fault.THROTTLE, Fault.THROTTLE)
    [original] = queue.receive()
    response = consumer.handle(event(original), FakeContext(FakeClock()))
    queue.acknowledge(response, original)

    assert failed_ids(response) == {original["messageId"]}  # kept: no copy replaces it
    reason = json.loads(log.getvalue())["reason"]
    assert "Maximum sending rate exceeded" in reason  # why it waits, then why it waits this way:
    assert "too large to copy" in reason and "65,536 bytes" in reason and "shorter than 65536 bytes" in reason
    assert queue.depth() == 1

    [again] = queue.receive()  # back by its visibility, on the last receive the queue allows
    assert again["messageId"] == original["messageId"] and again["attributes"]["ApproximateReceiveCount"] == "2"
    queue.acknowledge(consumer.handle(event(again), FakeContext(FakeClock())), again)
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"]["sendonce.reasonCode"]["StringValue"] == "max-receives"
    said = dead["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert "too large to copy" in said and "shorter than 65536 bytes" in said
    assert queue.depth() == 0 and pipeline.emails_for("receipt:raw:1") == 0


def test_a_delayed_copys_own_attributes_fit_in_the_room_every_job_leaves():
    """The most a copy carries: the longest receipt handle SQS documents (1,024 characters), more unsent-claim
    tokens than a copy keeps, a completion with an SES message id as SES writes them, the largest counts."""
    tokens = [uuid.uuid4().hex for _ in range(20)]
    ses_message_id = "0100019a6c3b1e2f-2f8f1d5e-6b8a-4c8a-9f1e-3a9e2c1d0b7a-000000"
    carried = (("sendonce.unsentClaim", "String", " ".join(tokens)),
               ("sendonce.unrecordedSend", "String", f"{uuid.uuid4().hex} {ses_message_id}"),
               ("sendonce.parkedSince", "Number", "1764990000000"), ("sendonce.postponements", "Number", "99"))
    record = SqsRecord("m", "{}", 9, None, "arn", receipt_handle="r" * 1_024, message_attributes=carried)
    for unsent_claim in (None, carried_claims([*record.unsent_claims, uuid.uuid4().hex])):
        copy = Redelivery._copy_request(record, 900, 2**63 - 1, unsent_claim, None, 2**63 - 1)
        assert message_bytes(copy) - len(b"{}") <= COPY_ATTRIBUTES_MAX_BYTES
