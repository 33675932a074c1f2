"""15. Attachments: what a file adds to the consumer's time per email, the S3 requests it takes, and its SQS cost.

The consumer is the bundled one (bench/consumers.py), in this process, against the emulator (`sendonce-local serve`)
in its own process, so the CPU time measured here is the consumer's alone. Its jobs are built by the producer's own
``EmailJob``; the claim-checked ones uploaded by its ``AttachmentStore``, as a producer with the pipeline's
attachments bucket uploads them. Every S3 request is counted on the producer's and the consumer's own clients, each
HTTP attempt (botocore's ``before-send``), with S3's answer to each.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import boto3
import consumers
from emulator_process import emulator_in_own_process
from plan import Spread

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import lambda_sqs_record as record

INLINE_BYTES = 100 * 1024  # the inline file: an invoice PDF
S3_BYTES = 5 * 1024 * 1024  # the claim-checked file: a ticket with its images, past any SQS body
KINDS = ("plain", "inline", "s3")
# The consumer's clients wait this long for an answer: the section counts requests, and a loaded emulator's answer
# after the deployed budget's 0.8 s would be counted as the record's retry (a test once failed so).
PATIENT_READ_S = 30.0
BUCKET = "bench-attachments"
HTML = "<p>Thanks for your order. Your invoice is attached.</p>" * 8


class _Requests:
    """Each HTTP attempt a client makes, by operation, and S3's answer (its status) to each."""

    def __init__(self, *clients: Any) -> None:
        self.sent: Counter[str] = Counter()
        self.answers: Counter[tuple[str, int]] = Counter()
        self.bytes_sent: Counter[str] = Counter()
        for client in clients:
            client.meta.events.register("before-send", self._before_send)
            client.meta.events.register("after-call", self._after_call)

    def _before_send(self, request: Any, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        self.sent[operation] += 1
        body = request.body
        self.bytes_sent[operation] += len(body) if isinstance(body, bytes | str) else 0

    def _after_call(self, http_response: Any, event_name: str, **_: Any) -> None:
        self.answers[event_name.rsplit(".", 1)[-1], http_response.status_code] += 1

    def clear(self) -> None:
        self.sent.clear()
        self.answers.clear()
        self.bytes_sent.clear()


def _email(key: str, attachment: Any = None) -> Any:
    from sendonce_producer import EmailJob

    return EmailJob(key, "Shop <receipts@example.com>", ["ada@example.org"], subject=f"Receipt {key}", html=HTML,
                    text="Thanks for your order.", attachments=[attachment] if attachment is not None else [])


def attachment_costs(emails: int, s3_emails: int, repeats: int) -> dict[str, Any]:
    """``repeats`` runs; in each, ``emails`` first sends of a plain job and of one with a 100 KB inline
    attachment, and ``s3_emails`` with a 5 MB one through the attachments bucket, in batches of ten at
    parallelism 1, the kinds in turn (each run starting with the next) so drift hits them alike. Per email: the
    consumer's CPU and wall time, its calls, and the bytes of each job body."""
    from sendonce_producer import Attachment, AttachmentStore

    files = random.Random(0)  # incompressible, as a PDF's streams are
    inline_file = Attachment.from_bytes(files.randbytes(INLINE_BYTES), "invoice-8891.pdf")
    s3_file = files.randbytes(S3_BYTES)
    with emulator_in_own_process():
        names = _resources()
        handler, clients = consumers.sendonce_handler(names["table"], names["dlq"], attachments_bucket=BUCKET,
                                                      read_timeout_s=PATIENT_READ_S)
        consumer = _Requests(*clients.values())
        producer_s3 = boto3.client("s3")
        producer = _Requests(producer_s3)
        store = AttachmentStore(BUCKET, producer_s3)
        handler({"Records": [record(_email("warm:0").to_message())]}, Context())  # connections opened
        cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
        wall: dict[str, list[float]] = {kind: [] for kind in KINDS}
        calls: dict[str, Counter[str]] = {kind: Counter() for kind in KINDS}
        ses_bytes: dict[str, int] = {}
        body_bytes: dict[str, int] = {}
        puts: Counter[tuple[str, int]] = Counter()
        retried_puts: Counter[tuple[str, int]] = Counter()
        uploaded = 0
        for run in range(repeats):
            prefix = uuid.uuid4().hex[:8]
            bodies = {
                "plain": [_email(f"{prefix}:plain:{n}").to_message() for n in range(emails)],
                "inline": [_email(f"{prefix}:inline:{n}", inline_file).to_message() for n in range(emails)],
            }
            claim_checked = [_email(f"{prefix}:s3:{n}", Attachment.from_bytes(s3_file, "tickets.pdf"))
                             for n in range(s3_emails)]
            producer.clear()
            offloaded = [store.offload(email) for email in claim_checked]
            puts.update(producer.answers)
            uploaded += len(claim_checked)
            producer.clear()
            for email in claim_checked:  # the producer retried (it did not hear SQS's answer): the same objects
                store.offload(email)
            retried_puts.update(producer.answers)
            bodies["s3"] = [email.to_message() for email in offloaded]
            for kind in KINDS[run % len(KINDS):] + KINDS[:run % len(KINDS)]:  # each run starts with another kind
                consumer.clear()
                took_cpu, took_wall = handle_in_batches(handler, bodies[kind])
                sent = consumer.answers["SendEmail", 200]
                assert sent == len(bodies[kind]), f"{kind}: {sent} of {len(bodies[kind])} sent"
                cpu[kind].append(took_cpu / len(bodies[kind]))
                wall[kind].append(took_wall / len(bodies[kind]))
                calls[kind].update(consumer.sent)
                ses_bytes[kind] = consumer.bytes_sent["SendEmail"] // len(bodies[kind])
                body_bytes[kind] = max(len(body.encode()) for body in bodies[kind])
            _delete_objects()
    sent_per_kind = {"plain": emails * repeats, "inline": emails * repeats, "s3": s3_emails * repeats}
    return {
        "emails": emails, "s3_emails": s3_emails, "repeats": repeats,
        "cpu_ms": {kind: Spread(values) for kind, values in cpu.items()},
        "wall_ms": {kind: Spread(values) for kind, values in wall.items()},
        "cpu_ratio": {kind: Spread([a / b for a, b in zip(cpu[kind], cpu["plain"], strict=True)]) for kind in KINDS},
        "wall_ratio": {kind: Spread([a / b for a, b in zip(wall[kind], wall["plain"], strict=True)])
                       for kind in KINDS},
        "calls": {kind: {op: n / sent_per_kind[kind] for op, n in counted.items()} for kind, counted in calls.items()},
        "ses_request_bytes": ses_bytes, "body_bytes": body_bytes,
        "puts": {answer: n / uploaded for answer, n in puts.items()},
        "retried_puts": {answer: n / uploaded for answer, n in retried_puts.items()},
        "inline_file_bytes": INLINE_BYTES, "s3_file_bytes": S3_BYTES,
    }


def handle_in_batches(handler: Any, bodies: Sequence[str | dict[str, Any]]) -> tuple[float, float]:
    """The consumer's CPU and wall milliseconds for ``bodies``, handed to it in batches of ten, all sent."""
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(bodies), 10):
        response = handler({"Records": [record(body) for body in bodies[start:start + 10]]}, Context())
        assert response == {"batchItemFailures": []}, response
    return (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000


def _resources() -> dict[str, str]:
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    table = f"dedupe-{uuid.uuid4().hex[:6]}"
    dynamodb.create_table(TableName=table, KeySchema=[{"AttributeName": "dedupeKey", "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": "dedupeKey", "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    return {"table": table, "dlq": sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:6]}")["QueueUrl"]}


def _delete_objects() -> None:
    """A run's objects removed (by a client not counted), so the emulator holds one run's files at most."""
    s3 = boto3.client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=BUCKET, Key=item["Key"])


def default_pipeline() -> tuple[int, int]:
    """The construct's default batch size, and the days its attachments bucket keeps an object (with the default
    props), as the construct derives them."""
    from sendonce_constructs.props import resolve_props

    props = resolve_props({"sender": "example.com", "attachments_bucket": True}, "bench")
    assert isinstance(props.batch_size, int) and isinstance(props.attachments_expiry_days, int)
    return props.batch_size, props.attachments_expiry_days
