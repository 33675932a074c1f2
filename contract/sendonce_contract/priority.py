"""A job's lane: ``"priority": "urgent"`` goes to the urgent queue (with ``urgent_lane``), anything else to the job
queue. Routing, not content: the field is not part of the payload hash, and a job on the other lane's queue is
still sent (paced with that lane).

No dependency: the Lambda bundle ships this module (the outbox relay routes with it).
"""

import json
from enum import StrEnum

from .schema import PRIORITY_FIELD as PRIORITY_FIELD  # its home is schema: the parser names it without this module


class Priority(StrEnum):
    """Which lane carries a job: ``bulk`` (the default) or ``urgent``."""

    BULK = "bulk"
    URGENT = "urgent"


DEFAULT_PRIORITY = Priority.BULK


def priority_of(body: str) -> Priority:
    """The lane a job body asks for, read without the rest of the contract: a relay routes with it before the
    consumer parses the job. A body that is not a JSON object, or names no known priority, goes to the bulk lane,
    whose consumer dead-letters it with the reason if it is malformed."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return DEFAULT_PRIORITY
    value = document.get(PRIORITY_FIELD) if isinstance(document, dict) else None
    return Priority.URGENT if value == Priority.URGENT.value else DEFAULT_PRIORITY


def queue_for(priority: Priority, queue_url: str, urgent_queue_url: str | None) -> str:
    """The queue a job of ``priority`` goes to: the urgent queue when there is one, else the job queue."""
    return urgent_queue_url if priority is Priority.URGENT and urgent_queue_url else queue_url
