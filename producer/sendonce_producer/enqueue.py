"""Sends jobs to the job queue: one at a time, or in batches of ten whose failures are retried and returned."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sendonce_contract.fifo import SEND_AT_ON_FIFO, fifo_message_ids, new_sending
from sendonce_contract.sqs_limits import batches
from sendonce_contract.tenant import tenant_group_id

from .attachment_store import AttachmentStore
from .job import EmailJob, InvalidJob
from .message_size import check_message_size
from .private_keys import digester

RETRIES = 3


@dataclass(frozen=True)
class EnqueueFailure:
    """A job SQS did not take, even after retries: the caller decides; nothing is dropped silently."""

    job: EmailJob
    code: str
    reason: str


def _client(sqs: Any | None) -> Any:
    if sqs is not None:
        return sqs
    import boto3

    return boto3.client("sqs")


def message_request(job: EmailJob, queue_url: str, group_id: str | None = None,
                    key_secret_arn: str | None = None) -> dict[str, Any]:
    """The SendMessage fields for ``job``; FIFO queues get the contract's group (the first recipient unless given)
    and deduplication id (from the key and this call), by the rule the outbox relay follows. On a standard queue a job's
    ``tenant`` is its ``MessageGroupId`` (SQS fair queues), as the tenant's digest under the pipeline's
    ``key_secret_arn`` when given (``key_privacy``). A job with ``send_at`` is refused for a FIFO queue
    (``InvalidJob``), as the consumer would dead-letter it."""
    check_fits_queue(job, queue_url)
    body = job.to_message()
    request: dict[str, Any] = {"MessageBody": body}
    fifo = queue_url.endswith(".fifo")
    if fifo:
        request.update(fifo_message_ids(body, job.dedupe_key, new_sending(), group_id))
    tenant_group = tenant_group_id(job.tenant, digester(key_secret_arn) if job.tenant else None, fifo)
    if tenant_group is not None:
        request["MessageGroupId"] = tenant_group
    return request


def check_fits_queue(job: EmailJob, queue_url: str) -> None:
    """``InvalidJob`` when the queue cannot carry ``job``: on a FIFO queue, a ``send_at``."""
    if queue_url.endswith(".fifo") and job.send_at is not None:
        raise InvalidJob(f"{job.dedupe_key!r}: {SEND_AT_ON_FIFO}")


def enqueue(queue_url: str, job: EmailJob, *, group_id: str | None = None, sqs: Any | None = None,
            key_secret_arn: str | None = None, attachments: AttachmentStore | None = None,
            max_message_size_bytes: int | None = None) -> str:
    """Send one job; returns the SQS message id. Errors raise (boto3's ClientError). With ``key_privacy``, pass the
    construct's ``key_secret`` ARN, so a ``tenant`` travels as its digest. With ``attachments`` (the pipeline's
    bucket), its large files are uploaded first and referenced. A job larger than the queue takes raises
    ``JobTooLarge`` (an ``InvalidJob``) before it is sent: the queue's size is ``max_message_size_bytes`` (the
    construct's) when given, else read from the queue."""
    if attachments is not None:
        job = attachments.offload(job)
    client = _client(sqs)
    request = message_request(job, queue_url, group_id, key_secret_arn)
    check_message_size(job, request, queue_url, client, max_message_size_bytes, attachments is not None)
    response = client.send_message(QueueUrl=queue_url, **request)
    return str(response["MessageId"])


def enqueue_many(
    queue_url: str, jobs: Sequence[EmailJob], *, sqs: Any | None = None, retries: int = RETRIES,
    backoff_s: float = 0.2, key_secret_arn: str | None = None, attachments: AttachmentStore | None = None,
    max_message_size_bytes: int | None = None,
) -> list[EnqueueFailure]:
    """Send jobs with SendMessageBatch, up to ten at a time (fewer when their bodies would pass what one batch may
    carry). Entries SQS failed for its own reasons are retried (``retries`` times, with backoff); what still fails,
    or failed for the caller's reasons, is returned. A job the queue cannot carry (``check_fits_queue``, or larger
    than the queue takes: ``JobTooLarge``) raises ``InvalidJob`` before any job is sent."""
    for job in jobs:  # all or none: a job the queue cannot carry is found before any is sent
        check_fits_queue(job, queue_url)
    if attachments is not None:
        jobs = [attachments.offload(job) for job in jobs]
    client = _client(sqs)
    requests = [(job, message_request(job, queue_url, key_secret_arn=key_secret_arn)) for job in jobs]
    for job, request in requests:
        check_message_size(job, request, queue_url, client, max_message_size_bytes, attachments is not None)
    failures: list[EnqueueFailure] = []
    for batch in batches(requests):
        pending = dict(enumerate(batch))
        for attempt in range(retries + 1):
            entries = [{"Id": str(i), **request} for i, (_, request) in pending.items()]
            response = client.send_message_batch(QueueUrl=queue_url, Entries=entries)
            retry: dict[int, tuple[EmailJob, dict[str, Any]]] = {}
            for failed in response.get("Failed", []):
                job, request = pending[int(failed["Id"])]
                if failed.get("SenderFault") or attempt == retries:
                    failures.append(EnqueueFailure(job, failed.get("Code", ""), failed.get("Message", "")))
                else:
                    retry[int(failed["Id"])] = (job, request)
            if not retry:
                break
            pending = retry
            time.sleep(backoff_s * 2**attempt)  # SQS's own trouble: give it a moment
    return failures
