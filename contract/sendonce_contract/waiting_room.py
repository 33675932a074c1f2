"""The waiting room: a DynamoDB table of the pipeline's own where a job scheduled further ahead than SQS can delay a
message waits, at a fixed cost however long, until the schedule watch sends it back to its lane's queue (docs:
scheduling).

One item per lane, due time and key: partition ``room`` is ``"<lane> schedule"``, sort ``due`` is ``"<due epoch ms,
15 digits> <the key's digest>"``, so the watch reads what is due in one Query per lane, in due order, and a job
delivered twice waits as one item. The item holds the SendMessage request that puts the job back (its body and
message attributes as a delayed copy carries them), the key to name it in logs.
"""

# No postponed annotations here: env_settings reads the configs' field declarations at run time.
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Annotated, Any, Final, NamedTuple, Self

from .deploy_config import Env
from .env_settings import TEXT, Var, from_env, to_env
from .schema import DEDUPE_KEY
from .sqs_limits import SQS_MAX_DELAY_S

ROOM: Final = "room"  # the partition key: "<lane> schedule"
DUE: Final = "due"  # the sort key: "<due ms, 15 digits> <key digest>"
REQUEST: Final = "request"  # the SendMessage request that puts the job back, as JSON
KEY: Final = DEDUPE_KEY  # the job's key as the consumer names it (its digest under key_privacy)
SCHEDULE: Final = "schedule"
DUE_DIGITS: Final = 15  # epoch milliseconds until the year 33658

# A job due further ahead than this waits in the room; nearer, as one delayed copy.
ROOM_AFTER_S: Final = SQS_MAX_DELAY_S
# How often EventBridge runs the schedule watch. A run sends back what is due (the urgent lane's first, a page of
# PAGE_ITEMS at a time) for as long as its time allows; what it cannot reach waits for the next run.
WATCH_EVERY_S: Final = 60
PAGE_ITEMS: Final = 100
# What one run of the watch sends back: the jobs due before its next two runs, each delayed for the rest of its
# wait, so a job arrives at its sendAt, not up to a minute after it, and a run that fails is made up by the next.
RELEASE_AHEAD_S: Final = 2 * WATCH_EVERY_S
# The largest request an item holds: DynamoDB's item limit is 400 KB, names and keys included. A larger job (a
# queue taking up to 1 MiB) waits as delayed copies instead.
MAX_REQUEST_BYTES: Final = 380_000


def room_of(lane: str) -> str:
    return f"{lane} {SCHEDULE}"


def due_of(due_ms: int, dedupe_key: str) -> str:
    return f"{due_ms:0{DUE_DIGITS}d} {hashlib.sha256(dedupe_key.encode()).hexdigest()[:32]}"


def due_ms_of(due: str) -> int:
    return int(due.split(" ", 1)[0])


def item(lane: str, due_ms: int, dedupe_key: str, request: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The job's item, in DynamoDB's attribute values."""
    return {ROOM: {"S": room_of(lane)}, DUE: {"S": due_of(due_ms, dedupe_key)},
            REQUEST: {"S": json.dumps(request, separators=(",", ":"))}, KEY: {"S": dedupe_key}}


class ScheduleWatchConfig(NamedTuple):
    """The schedule watch's (``sendonce_runtime.schedule_watch.handler``) environment: the room, and each lane's
    queue (the job queue's is the bulk lane's, or the only one), declared as the consumer's config is."""

    table_name: Annotated[str, Var(Env.WAITING_ROOM_TABLE, TEXT, required=True)]
    queue_url: Annotated[str, Var(Env.QUEUE_URL, TEXT, required=True)]
    urgent_queue_url: Annotated[str | None, Var(Env.URGENT_QUEUE_URL, TEXT)] = None
    pipeline_name: Annotated[str | None, Var(Env.PIPELINE_NAME, TEXT)] = None  # the metrics' Pipeline dimension
    # Each lane's DLQ: a job SQS will never take back (too large with its attributes) goes there with the reason.
    dead_letter_queue_url: Annotated[str | None, Var(Env.DLQ_URL, TEXT)] = None
    urgent_dead_letter_queue_url: Annotated[str | None, Var(Env.URGENT_DLQ_URL, TEXT)] = None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)
