"""The waiting room: a DynamoDB table of the pipeline's own where a job waits at a fixed cost however long, until
the schedule watch sends it back to its lane's queue: a job scheduled further ahead than SQS can delay a message
(docs: scheduling), and a job parked while SES stops sending (docs: when SES stops sending).

A scheduled job: partition ``room`` is ``"<lane> schedule"``, sort ``due`` is ``"<due epoch ms, 15 digits> <the key's
digest>"``, so the watch reads what is due in one Query per lane, in due order, and a job delivered twice waits as
one item. A parked job: partition ``"<lane> stop <scope>"`` (the scope as the lane's stop item names it), sort
``"<epoch ms, 15 digits> <the key's digest>"``, the time the latest it may wait (its first queueing, plus the
queue's retention, less a margin), so in about the order they were parked; and one marker per stopped
scope in partition ``"stops"``, sort the stop's partition, so the watch finds every stop with one Query and asks SES
about each. An item holds the SendMessage request that puts the job back (its body and message attributes as a
delayed copy carries them), the key to name it in logs.
"""

# No postponed annotations here: env_settings reads the configs' field declarations at run time.
import hashlib
import json
import os
from collections.abc import Mapping
from typing import Annotated, Any, Final, NamedTuple, Self

from .deploy_config import Env
from .env_settings import TEXT, Var, from_env, to_env
from .schema import DEDUPE_KEY, TENANT_FIELD
from .sqs_limits import SQS_MAX_DELAY_S

ROOM: Final = "room"  # the partition key: "<lane> schedule"
DUE: Final = "due"  # the sort key: "<due ms, 15 digits> <key digest>"
REQUEST: Final = "request"  # the SendMessage request that puts the job back, as JSON
KEY: Final = DEDUPE_KEY  # the job's key as the consumer names it (its digest under key_privacy)
SCHEDULE: Final = "schedule"
STOPS: Final = "stops"  # the markers' partition: one item per lane and stopped scope the room holds jobs for
STOP: Final = "stop"
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


def stop_room_of(lane: str, scope: str) -> str:
    return f"{lane} {STOP} {scope}"


def due_of(due_ms: int, dedupe_key: str) -> str:
    return f"{due_ms:0{DUE_DIGITS}d} {hashlib.sha256(dedupe_key.encode()).hexdigest()[:32]}"


def due_ms_of(due: str) -> int:
    return int(due.split(" ", 1)[0])


def item(room: str, due_ms: int, dedupe_key: str, request: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """A job's item in ``room`` (``room_of`` or ``stop_room_of``), in DynamoDB's attribute values."""
    return {ROOM: {"S": room}, DUE: {"S": due_of(due_ms, dedupe_key)},
            REQUEST: {"S": json.dumps(request, separators=(",", ":"))}, KEY: {"S": dedupe_key}}


class StopMarker:
    """A stop the room holds parked jobs for, as its marker item says it: what the watch asks SES about, the lane's
    stop item it marks resumed, and the token a consumer writes anew with each parked batch (the watch removes a
    marker only while its token is the one it read, so a job parked meanwhile is never left without one)."""

    KIND = "kind"  # paused, setup or quota (the lane's stop item's)
    REASON = "reason"  # SES's refusal, addresses taken out
    LANE = "lane"
    TENANT = TENANT_FIELD  # a tenant's stop: SES's name for the tenant, which its GetTenant takes
    STOP_KEY = "stopKey"  # the lane's stop item in the dedupe table (SesStopItem.key)
    TOKEN = "token"
    RELEASED_AT = "releasedAt"  # epoch ms: when the watch last released the stop's jobs on SES's word

    __slots__ = ("kind", "lane", "reason", "released_at_ms", "room", "stop_key", "tenant_name", "token")

    def __init__(self, room: str, lane: str, kind: str, reason: str, stop_key: str, tenant_name: str | None,
                 token: str, released_at_ms: int | None = None) -> None:
        self.room, self.lane, self.kind, self.reason = room, lane, kind, reason
        self.stop_key, self.tenant_name, self.token, self.released_at_ms = stop_key, tenant_name, token, released_at_ms

    def item(self) -> dict[str, dict[str, str]]:
        written = {ROOM: {"S": STOPS}, DUE: {"S": self.room}, StopMarker.KIND: {"S": self.kind},
                   StopMarker.REASON: {"S": self.reason}, StopMarker.LANE: {"S": self.lane},
                   StopMarker.STOP_KEY: {"S": self.stop_key}, StopMarker.TOKEN: {"S": self.token}}
        if self.tenant_name is not None:
            written[StopMarker.TENANT] = {"S": self.tenant_name}
        return written

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Self:
        released = item.get(StopMarker.RELEASED_AT)
        return cls(item[DUE]["S"], item[StopMarker.LANE]["S"], item[StopMarker.KIND]["S"],
                   item[StopMarker.REASON]["S"], item[StopMarker.STOP_KEY]["S"],
                   item[StopMarker.TENANT]["S"] if StopMarker.TENANT in item else None,
                   item[StopMarker.TOKEN]["S"], int(released["N"]) if released else None)


# A release on SES's word that SES's refusals then contradicted (its status said sending, its sends still refused):
# the stop's jobs are released on its word again only this long after, so a disagreement costs the old 15-minute
# wait, never a release a minute.
BELIEVED_AGAIN_AFTER_S: Final = SQS_MAX_DELAY_S


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
    # SES's stops: the dedupe table, where each lane's stop item says whether a stop holds (the watch marks it over
    # when SES says it sends again), and what SES is asked about a setup stop.
    ledger_table_name: Annotated[str | None, Var(Env.TABLE_NAME, TEXT)] = None
    sender_identity: Annotated[str | None, Var(Env.SENDER_IDENTITY, TEXT)] = None
    configuration_set: Annotated[str | None, Var(Env.CONFIGURATION_SET, TEXT)] = None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)
