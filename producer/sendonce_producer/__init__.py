"""The producer side of sendonce: build dedupe keys, validate jobs, enqueue them or write them to an outbox, and
read what became of each email or cancel it.

Needs boto3 only: install ``sendonce-producer`` in an app server; it never imports aws-cdk-lib.
"""

from .cancel import Cancellation, cancel
from .enqueue import EnqueueFailure, enqueue, enqueue_many
from .job import EmailJob, InvalidJob
from .keys import dedupe_key
from .outbox import outbox_put
from .pipeline import Pipeline
from .status import EmailRecord, SesOutcome, status

__all__ = ["Cancellation", "EmailJob", "EmailRecord", "EnqueueFailure", "InvalidJob", "Pipeline", "SesOutcome",
           "cancel", "dedupe_key", "enqueue", "enqueue_many", "outbox_put", "status"]
