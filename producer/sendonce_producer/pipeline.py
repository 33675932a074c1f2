"""One deployed pipeline, bound once: its job queue, its dedupe table and its outbox, for an application to use."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sendonce_contract.cancellation import CANCEL_LASTS
from sendonce_contract.priority import queue_for
from sendonce_contract.record import EmailRecord
from sendonce_contract.tenant import tenant_label

from .attachment_store import DEFAULT_INLINE_LIMIT_BYTES, AttachmentStore
from .cancel import Cancellation, cancel
from .enqueue import EnqueueFailure, enqueue, enqueue_many
from .job import EmailJob
from .outbox import outbox_put
from .private_keys import digester
from .status import status


@dataclass(frozen=True)
class Pipeline:
    """The names come from the construct (``queue.queue_url``, ``table.table_name``, ``outbox_table.table_name``,
    passed to the application as environment) or from ``sendonce info``; ``key_secret_arn`` is its
    ``key_secret`` with ``key_privacy``; ``urgent_queue_url`` is its ``urgent_queue.queue_url`` with
    ``urgent_lane``: a job with ``priority="urgent"`` goes there (to ``queue_url`` without one);
    ``attachments_bucket`` is its ``attachments_bucket``'s name: files larger than ``attachment_inline_limit_bytes``
    are uploaded there and referenced; ``max_message_size_bytes`` is its ``max_message_size_bytes`` (read from the
    queue when not given): a job larger than that raises ``JobTooLarge`` unsent. Clients default to boto3's."""

    queue_url: str
    table_name: str
    outbox_table_name: str | None = None
    dedupe_ttl_s: int | None = None  # deprecated and ignored: a cancel outlives its job whatever the dedupe_ttl
    key_secret_arn: str | None = None  # the construct's key_secret, with key_privacy
    urgent_queue_url: str | None = None  # the construct's urgent_queue, with urgent_lane
    sqs: Any | None = None
    dynamodb: Any | None = None
    attachments_bucket: str | None = None
    attachment_inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES
    s3: Any | None = None
    max_message_size_bytes: int | None = None  # the construct's, when set; else each queue's own is read

    def __post_init__(self) -> None:
        if self.dedupe_ttl_s is not None:
            warnings.warn(f"Pipeline(dedupe_ttl_s=...) is ignored: {CANCEL_LASTS}", DeprecationWarning, stacklevel=3)

    @property
    def attachment_store(self) -> AttachmentStore | None:
        if self.attachments_bucket is None:
            return None
        return AttachmentStore(self.attachments_bucket, self.s3, self.key_secret_arn,
                               self.attachment_inline_limit_bytes)

    def queue_of(self, job: EmailJob) -> str:
        """The queue ``job`` goes to: the urgent lane's for an urgent job, when the pipeline has one."""
        return queue_for(job.lane, self.queue_url, self.urgent_queue_url)

    def enqueue(self, job: EmailJob, *, group_id: str | None = None) -> str:
        return enqueue(self.queue_of(job), job, group_id=group_id, sqs=self.sqs, key_secret_arn=self.key_secret_arn,
                       attachments=self.attachment_store, max_message_size_bytes=self.max_message_size_bytes)

    def enqueue_many(self, jobs: Sequence[EmailJob]) -> list[EnqueueFailure]:
        """Each lane's jobs in batches to its own queue; the failures of both, in the order of ``jobs``."""
        by_queue: dict[str, list[EmailJob]] = {}
        for job in jobs:
            by_queue.setdefault(self.queue_of(job), []).append(job)
        store = self.attachment_store
        failures = [f for queue, lane_jobs in by_queue.items()
                    for f in enqueue_many(queue, lane_jobs, sqs=self.sqs, key_secret_arn=self.key_secret_arn,
                                          attachments=store, max_message_size_bytes=self.max_message_size_bytes)]
        order = {id(job): index for index, job in enumerate(jobs)}
        return sorted(failures, key=lambda failure: order[id(failure.job)])

    def tenant_label(self, tenant: str) -> str:
        """How ``tenant`` appears in the queue's group ids, logs, outcome events and metrics: itself, or with
        ``key_privacy`` its digest (to find one tenant's events)."""
        label = tenant_label(tenant, digester(self.key_secret_arn))
        assert label is not None
        return label

    def status(self, key: str) -> EmailRecord | None:
        return status(self.table_name, key, key_secret_arn=self.key_secret_arn, dynamodb=self.dynamodb)

    def cancel(self, key: str) -> Cancellation:
        return cancel(self.table_name, key, key_secret_arn=self.key_secret_arn, dynamodb=self.dynamodb)

    def outbox_put(self, job: EmailJob, *, group_id: str | None = None, fail_if_exists: bool = False) -> dict[str, Any]:
        if self.outbox_table_name is None:
            raise ValueError("this Pipeline has no outbox_table_name: deploy with outbox=True and pass its table name")
        store = self.attachment_store
        return outbox_put(self.outbox_table_name, store.offload(job) if store else job, group_id=group_id,
                          fail_if_exists=fail_if_exists)
