"""The producer side of sendonce: build dedupe keys, validate jobs, enqueue them or write them to an outbox, and
read what became of each email or cancel it.

Needs boto3 only: install ``sendonce-producer`` in an app server; it never imports aws-cdk-lib.
"""

from .attachment_store import DEFAULT_INLINE_LIMIT_BYTES, AttachmentStore
from .attachments import Attachment
from .cancel import Cancellation, cancel
from .enqueue import EnqueueFailure, enqueue, enqueue_many
from .headers import entity_ref_id, one_click_unsubscribe
from .job import EmailJob, InvalidJob
from .keys import dedupe_key
from .message_size import JobTooLarge
from .outbox import outbox_put
from .pipeline import Pipeline
from .status import EmailRecord, SesOutcome, status

__all__ = ["DEFAULT_INLINE_LIMIT_BYTES", "Attachment", "AttachmentStore", "Cancellation", "EmailJob", "EmailRecord",
           "EnqueueFailure", "InvalidJob", "JobTooLarge", "Pipeline", "SesOutcome", "cancel", "dedupe_key", "enqueue",
           "enqueue_many", "entity_ref_id", "one_click_unsubscribe", "outbox_put", "status"]
