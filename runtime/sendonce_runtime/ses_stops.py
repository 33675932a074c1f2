"""SES's own stops, learned once and waited out cheaply: a paused account or tenant, a refusal that names the
pipeline's setup, the daily quota (docs: when SES stops sending).

One refusal teaches an instance. It records the stop in the dedupe table (one item per lane and scope,
:class:`~sendonce_contract.schema.SesStopItem`), and from then on parks every job of the scope (the account's:
every job of the lane; a tenant's: that tenant's only) in the waiting room, or, without one, as a delayed copy for
SQS's longest delay, without claiming its key or asking SES; with a room, the schedule watch asks SES's own status
each minute and ends the stop (``schedule_watch``). Once a minute per lane, one arriving job goes on to ask SES: the
one whose instance wins the
conditional write that moves the item's ``probeAt`` a minute on, so the lane's other instances wait for the same
minute. When SES accepts a send of the scope, the stop is over: the item is marked resumed, and every instance
sends again by its next probe at the latest. The item's writes are on the table's stream, which publishes the stop
and its end as outcome events.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.message import ParsedJob
from sendonce_contract.schema import SesStopItem

from .checks import Delivery, Rest
from .clock import Clock, Deadline
from .dynamodb_values import condition_failed, found_item, number, string
from .outcome import Outcome, Redeliver, Verdict
from .ses_sender import Accepted, Refused, SendOutcome, Stop

PROBE_EVERY_MS = 60_000  # the lane asks SES again at most this often while it is stopped
STOP_ITEM_TTL_S = 7 * 86_400  # a stop item nobody has written for a week (a lane without jobs) is gone
ACCOUNT = "account"  # the scope of a stop of every job of the lane; a tenant's is "tenant/<name>"


def tenant_scope(tenant: str) -> str:
    return f"tenant/{tenant}"  # "/" is in no SES tenant name, so it never reads as the account's


class LaneStop:
    """A stop this instance knows: what the lane's stop item and a parked job's room name it by."""

    __slots__ = ("board_scope", "kind", "learned_at_ms", "probe_at_ms", "reason", "stop_key", "tenant_name")

    def __init__(self, kind: str, reason: str, probe_at_ms: int, board_scope: str, stop_key: str,
                 tenant: str | None, learned_at_ms: int) -> None:
        self.kind = kind
        self.learned_at_ms = learned_at_ms  # this instance's last refusal of the scope
        self.reason = reason
        self.probe_at_ms = probe_at_ms
        self.board_scope = board_scope  # as the board names it: a tenant by its label (its digest, private keys)
        self.stop_key = stop_key  # the lane's stop item (SesStopItem.key)
        self.tenant_name = tenant  # a tenant's stop: SES's name for it, which the schedule watch asks GetTenant about


class StopBoard:
    """The lane's stops in the dedupe table, shared by its instances. Every call is one conditional write; a
    failed call costs only a probe that comes sooner (each instance then asks SES on its own minute)."""

    def __init__(self, client: Any, table: str, pipeline: str | None, lane: str | None, clock: Clock) -> None:
        self._client = client
        self._table = table
        self._pipeline = pipeline
        self._lane = lane
        self._clock = clock

    def stopped(self, scope: str, kind: str, reason: str) -> int:
        """Record that SES refused a send of ``scope`` (a new stop, or a probe refused, whose kind and reason may
        have changed): when the lane may ask again. A stop the lane knows keeps its probe time."""
        now = self._clock.now_ms()
        values = {":kind": string(kind), ":reason": string(reason), ":expires": number(now // 1000 + STOP_ITEM_TTL_S)}
        try:
            item = self._write(scope, f"SET {SesStopItem.KIND} = :kind, {SesStopItem.REASON} = :reason, "
                               f"{SesStopItem.EXPIRES_AT} = :expires", LIVE, values)
            return int(item[SesStopItem.PROBE_AT]["N"])
        except ClientError as error:
            if not condition_failed(error):
                raise
        # A new stop, or one after a resumption: the stream publishes it.
        values.update({":probe": number(now + PROBE_EVERY_MS), ":now": number(now), ":scope": string(scope),
                       ":lane": string(self._lane or "")})
        try:
            self._write(scope, f"SET {SesStopItem.KIND} = :kind, {SesStopItem.REASON} = :reason, "
                        f"{SesStopItem.PROBE_AT} = :probe, {SesStopItem.EXPIRES_AT} = :expires, "
                        f"{SesStopItem.STOPPED_AT} = :now, {SesStopItem.SCOPE} = :scope, "
                        f"{SesStopItem.LANE} = :lane REMOVE {SesStopItem.RESUMED_AT}",
                        f"NOT ({LIVE})", values)
        except ClientError as error:
            old = found_item(error)
            if old is not None and _live(old):
                return int(old[SesStopItem.PROBE_AT]["N"])  # another instance recorded it first
            raise
        return now + PROBE_EVERY_MS

    def take_probe(self, scope: str) -> tuple[bool, int | None]:
        """Whether this instance asks SES now (it moved the lane's probe time a minute on), and the lane's next
        probe time; (False, None) once the stop is over (another instance saw SES send). A stop the table no
        longer holds (a write that failed, or a week unprobed) is probed on this instance's own minute."""
        now = self._clock.now_ms()
        try:
            self._write(scope, f"SET {SesStopItem.PROBE_AT} = :probe, {SesStopItem.EXPIRES_AT} = :expires",
                        f"{LIVE} AND {SesStopItem.PROBE_AT} <= :now",
                        {":probe": number(now + PROBE_EVERY_MS), ":now": number(now),
                         ":expires": number(now // 1000 + STOP_ITEM_TTL_S)})
            return True, now + PROBE_EVERY_MS
        except ClientError as error:
            if not condition_failed(error):
                raise
            old = found_item(error)
            if old is None:
                return True, now + PROBE_EVERY_MS
            if not _live(old):
                return False, None
            return False, int(old[SesStopItem.PROBE_AT]["N"])

    def resumed(self, scope: str) -> None:
        """SES accepted a send of ``scope``: the stop is over (the stream publishes it)."""
        mark_resumed(self._client, self._table, self.key(scope), self._clock.now_ms())

    def key(self, scope: str) -> str:
        return SesStopItem.key(self._pipeline, self._lane, scope)

    def _write(self, scope: str, update: str, condition: str, values: dict[str, Any]) -> dict[str, Any]:
        response = self._client.update_item(
            TableName=self._table, Key={SesStopItem.KEY: string(self.key(scope))},
            UpdateExpression=update, ConditionExpression=condition, ExpressionAttributeValues=values,
            ReturnValues="ALL_NEW", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        return dict(response.get("Attributes", {}))


class SesStops:
    """The check that parks the jobs of a scope SES stopped, and the listener told what SES said of each send
    once the record's claim is settled (so these calls never widen a send's crash window)."""

    def __init__(self, board: StopBoard, clock: Clock,
                 tenant_label: Callable[[ParsedJob], str | None] | None = None,
                 tenant_disabled: Callable[[str], bool | None] | None = None, ask_budget_ms: int = 0) -> None:
        self._board = board
        self._clock = clock
        self._label = tenant_label or (lambda job: job.tenant)  # as logs name it (its digest, private keys)
        self._tenant_disabled = tenant_disabled  # with ses_tenants: SES's GetTenant
        self._ask_budget_ms = ask_budget_ms  # the time left a GetTenant needs (its connect and read timeouts)
        self._asked: dict[str, tuple[bool, int]] = {}  # tenant -> (disabled, until when the answer stands)
        self._stops: dict[str, LaneStop] = {}
        self._lock = threading.Lock()  # a batch's records run on several threads

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        scope = self._stopped_scope(delivery.job)
        if scope is None or self._unparked_since(delivery.record.unparked_at, scope) or self._take_probe(scope):
            return rest(delivery)
        stop = self._stops.get(scope)
        if stop is None:  # over since: another instance saw SES send
            return rest(delivery)
        outcome = Outcome.QUOTA_EXHAUSTED if stop.kind == Stop.QUOTA else Outcome.SES_STOPPED
        return Redeliver(delivery.result(outcome, f"parked: SES stopped {self._describe(scope)} ({stop.reason})"),
                         stop=stop)

    def _unparked_since(self, unparked_at_ms: int | None, scope: str) -> bool:
        """Whether the schedule watch sent this job back from the waiting room, SES having said it sends again,
        since this instance last heard SES refuse the scope: it goes to SES, whatever the instance's probe time.
        A refusal heard since parks it again, without asking SES for each job of the backlog."""
        with self._lock:
            stop = self._stops.get(scope)
        return unparked_at_ms is not None and (stop is None or stop.learned_at_ms < unparked_at_ms)

    def heard(self, outcome: SendOutcome, job: ParsedJob, deadline: Deadline | None = None) -> LaneStop | None:
        """What SES said of a send: a stop to learn (returned), or a send accepted that ends the stops of its
        scopes."""
        if isinstance(outcome, Refused) and outcome.stop is not None:
            tenant = job.tenant if outcome.stop == Stop.PAUSED and self._tenants_pause(job, deadline) else None
            label = self._label(job) if tenant is not None else None
            scope, board_scope = ACCOUNT, ACCOUNT
            if tenant is not None:
                scope, board_scope = tenant_scope(tenant), tenant_scope(label or tenant)
            # SES's reason with the tenant as the logs name it (its digest under key_privacy).
            reason = outcome.reason if not job.tenant or label in (None, job.tenant) else outcome.reason.replace(
                job.tenant, str(label))
            return self._learn(scope, board_scope, outcome.stop, reason, tenant)
        if isinstance(outcome, Accepted) and self._stops:
            for scope in self._scopes(job):
                self._resume(scope)
        return None

    def _tenants_pause(self, job: ParsedJob, deadline: Deadline | None) -> bool:
        """Whether a paused refusal of ``job`` is its tenant's: GetTenant says DISABLED, or SES cannot say (so no
        other tenant waits for it); asked at most once a minute a tenant, and only with time for the call."""
        if self._tenant_disabled is None or job.tenant is None:
            return False
        now = self._clock.now_ms()
        with self._lock:
            asked = self._asked.get(job.tenant)
        if asked is not None and now < asked[1]:
            return asked[0]
        if deadline is not None and deadline.remaining_ms() < self._ask_budget_ms:
            return True
        disabled = self._tenant_disabled(job.tenant)
        answer = True if disabled is None else disabled
        with self._lock:
            self._asked[job.tenant] = (answer, now + PROBE_EVERY_MS)
        return answer

    def _scopes(self, job: ParsedJob) -> list[str]:
        """The scopes a job belongs to, its tenant's first: a job of a stopped tenant waits for its tenant's probe
        and never takes the account's, which SES would refuse for the tenant's sake."""
        return ([tenant_scope(job.tenant)] if job.tenant is not None else []) + [ACCOUNT]

    def _stopped_scope(self, job: ParsedJob) -> str | None:
        if not self._stops:
            return None
        with self._lock:
            return next((scope for scope in self._scopes(job) if scope in self._stops), None)

    def _take_probe(self, scope: str) -> bool:
        """Whether this job asks SES: its scope's probe time has come and the lane's turn is this instance's."""
        now = self._clock.now_ms()
        with self._lock:
            stop = self._stops.get(scope)
            if stop is None or now < stop.probe_at_ms:
                return stop is None
            stop.probe_at_ms = now + PROBE_EVERY_MS  # one probe per minute from this instance, whatever the board
            board_scope = stop.board_scope
        try:
            won, probe_at = self._board.take_probe(board_scope)
        except (ClientError, BotoCoreError):
            return True  # the board cannot say: this instance asks on its own minute
        with self._lock:
            if probe_at is None:
                self._stops.pop(scope, None)
            elif scope in self._stops:
                self._stops[scope].probe_at_ms = probe_at
        return won or probe_at is None

    def _learn(self, scope: str, board_scope: str, kind: str, reason: str, tenant: str | None) -> LaneStop:
        now = self._clock.now_ms()
        probe_at = now + PROBE_EVERY_MS
        with contextlib.suppress(ClientError, BotoCoreError):  # else this instance keeps its own minute
            probe_at = self._board.stopped(board_scope, kind, reason)
        with self._lock:
            known = self._stops.get(scope)
            # A probe this instance just took keeps its minute, whatever the lane's time the board returns.
            probe_at = max(probe_at, known.probe_at_ms) if known is not None else probe_at
            stop = self._stops[scope] = LaneStop(kind, reason, probe_at, board_scope, self._board.key(board_scope),
                                                 tenant, now)
        return stop

    def _resume(self, scope: str) -> None:
        with self._lock:
            stop = self._stops.pop(scope, None)
        if stop is not None:
            # If this fails, the others learn it at their next probe, which SES then accepts.
            with contextlib.suppress(ClientError, BotoCoreError):
                self._board.resumed(stop.board_scope)

    @staticmethod
    def _describe(scope: str) -> str:
        return "the account's sending" if scope == ACCOUNT else "this tenant's sending"


LIVE = f"attribute_exists({SesStopItem.STOPPED_AT}) AND attribute_not_exists({SesStopItem.RESUMED_AT})"


def mark_resumed(client: Any, table: str, stop_key: str, now_ms: int) -> None:
    """The lane's stop item marked over (SES accepted a send, or said it sends again): its instances send again by
    their next probe, and the stream publishes the resumption. Nothing to do for a stop already over."""
    try:
        client.update_item(TableName=table, Key={SesStopItem.KEY: string(stop_key)},
                           UpdateExpression=f"SET {SesStopItem.RESUMED_AT} = :now", ConditionExpression=LIVE,
                           ExpressionAttributeValues={":now": number(now_ms)})
    except ClientError as error:
        if not condition_failed(error):
            raise


def stop_live(client: Any, table: str, stop_key: str) -> bool | None:
    """Whether the lane's stop item says the stop still holds; None when there is none (never written, or a week
    unwritten: its TTL)."""
    item = client.get_item(TableName=table, Key={SesStopItem.KEY: string(stop_key)}, ConsistentRead=True)
    return _live(item["Item"]) if item.get("Item") else None


def _live(item: dict[str, Any]) -> bool:
    return SesStopItem.STOPPED_AT in item and SesStopItem.RESUMED_AT not in item and SesStopItem.PROBE_AT in item
