"""The producer side of sendonce: build dedupe keys, validate jobs, enqueue them, or write them to an outbox.

Needs boto3 only: install ``sendonce-producer`` in an app server; it never imports aws-cdk-lib.
"""

from .enqueue import EnqueueFailure, enqueue, enqueue_many
from .job import EmailJob, InvalidJob
from .keys import dedupe_key
from .outbox import outbox_put

__all__ = ["EmailJob", "EnqueueFailure", "InvalidJob", "dedupe_key", "enqueue", "enqueue_many", "outbox_put"]
