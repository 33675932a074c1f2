"""SES's own stops, learned once and waited out cheaply: a paused account or tenant, a refusal that names the
pipeline's setup, the daily quota (docs: when SES stops sending).

One refusal teaches an instance. It records the stop in the dedupe table (one item per lane and scope,
:class:`~sendonce_contract.schema.SesStopItem`), and from then on parks every job of the scope (the account's:
every job of the lane; a tenant's: that tenant's only) as a delayed copy for SQS's longest delay, without claiming
its key or asking SES. Once a minute per lane, one job goes on to ask SES: the one whose instance wins the
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
from .outcome import Outcome, Redeliver, Verdict
from .ses_sender import Accepted, Refused, SendOutcome, Stop

PROBE_EVERY_MS = 60_000  # the lane asks SES again at most this often while it is stopped
STOP_ITEM_TTL_S = 7 * 86_400  # a stop item nobody has probed for a week is gone
ACCOUNT = "account"  # the scope of a stop of every job of the lane; a tenant's is "tenant/<name>"


def tenant_scope(tenant: str) -> str:
    return f"tenant/{tenant}"  # "/" is in no SES tenant name, so it never reads as the account's


class _Stop:
    __slots__ = ("board_scope", "kind", "probe_at_ms", "reason")

    def __init__(self, kind: str, reason: str, probe_at_ms: int, board_scope: str) -> None:
        self.kind = kind
        self.reason = reason
        self.probe_at_ms = probe_at_ms
        self.board_scope = board_scope  # as the board names it: a tenant by its label (its digest, private keys)


class StopBoard:
    """The lane's stops in the dedupe table, shared by its instances. Every call is one conditional write; a
    failed call costs only a probe that comes sooner (each instance then asks SES on its own minute)."""

    def __init__(self, client: Any, table: str, lane: str | None, clock: Clock) -> None:
        self._client = client
        self._table = table
        self._lane = lane
        self._clock = clock

    def stopped(self, scope: str, kind: str, reason: str) -> int:
        """Record that SES refused a send of ``scope`` (a new stop, or a probe refused): when the lane may ask
        again. A stop another instance recorded keeps its probe time."""
        now = self._clock.now_ms()
        probe_at = now + PROBE_EVERY_MS
        values = {":kind": _s(kind), ":reason": _s(reason), ":probe": _n(probe_at), ":now": _n(now),
                  ":expires": _n(now // 1000 + STOP_ITEM_TTL_S)}
        live = f"attribute_exists({SesStopItem.STOPPED_AT}) AND attribute_not_exists({SesStopItem.RESUMED_AT})"
        try:
            # A stop the lane knows: this refusal was its probe's, so the next probe is a minute on.
            self._write(scope, f"SET {SesStopItem.KIND} = :kind, {SesStopItem.REASON} = :reason, "
                        f"{SesStopItem.PROBE_AT} = :probe, {SesStopItem.EXPIRES_AT} = :expires",
                        f"{live} AND {SesStopItem.PROBE_AT} <= :now", values)
            return probe_at
        except ClientError as error:
            old = _old_item(error)
            if old is not None and _live(old):
                return int(old[SesStopItem.PROBE_AT]["N"])  # the lane's probe time stands
            if not _conditional(error):
                raise
        # A new stop, or one after a resumption: the stream publishes it.
        values.update({":scope": _s(scope), ":lane": _s(self._lane or "")})
        try:
            self._write(scope, f"SET {SesStopItem.KIND} = :kind, {SesStopItem.REASON} = :reason, "
                        f"{SesStopItem.PROBE_AT} = :probe, {SesStopItem.EXPIRES_AT} = :expires, "
                        f"{SesStopItem.STOPPED_AT} = :now, {SesStopItem.SCOPE} = :scope, "
                        f"{SesStopItem.LANE} = :lane REMOVE {SesStopItem.RESUMED_AT}",
                        f"NOT ({live})", values)
        except ClientError as error:
            old = _old_item(error)
            if old is not None and _live(old):
                return int(old[SesStopItem.PROBE_AT]["N"])  # another instance recorded it first
            raise
        return probe_at

    def take_probe(self, scope: str) -> tuple[bool, int | None]:
        """Whether this instance asks SES now (it moved the lane's probe time a minute on); else the lane's probe
        time, or None when the stop is over (another instance saw SES send)."""
        now = self._clock.now_ms()
        try:
            self._write(scope, f"SET {SesStopItem.PROBE_AT} = :probe",
                        f"attribute_exists({SesStopItem.STOPPED_AT}) AND attribute_not_exists("
                        f"{SesStopItem.RESUMED_AT}) AND {SesStopItem.PROBE_AT} <= :now",
                        {":probe": _n(now + PROBE_EVERY_MS), ":now": _n(now)})
            return True, now + PROBE_EVERY_MS
        except ClientError as error:
            if not _conditional(error):
                raise
            old = _old_item(error)
            if old is None or not _live(old):
                return False, None
            return False, int(old[SesStopItem.PROBE_AT]["N"])

    def resumed(self, scope: str) -> None:
        """SES accepted a send of ``scope``: the stop is over (the stream publishes it)."""
        try:
            self._write(scope, f"SET {SesStopItem.RESUMED_AT} = :now",
                        f"attribute_exists({SesStopItem.STOPPED_AT}) AND attribute_not_exists("
                        f"{SesStopItem.RESUMED_AT})", {":now": _n(self._clock.now_ms())})
        except ClientError as error:
            if not _conditional(error):
                raise

    def _write(self, scope: str, update: str, condition: str, values: dict[str, Any]) -> None:
        self._client.update_item(
            TableName=self._table, Key={SesStopItem.KEY: _s(SesStopItem.key(self._lane, scope))},
            UpdateExpression=update, ConditionExpression=condition, ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD")


class SesStops:
    """The check that parks the jobs of a scope SES stopped, and the listener told what SES said of each send."""

    def __init__(self, board: StopBoard | None, clock: Clock,
                 tenant_label: Callable[[ParsedJob], str | None] | None = None) -> None:
        self._board = board
        self._clock = clock
        self._label = tenant_label or (lambda job: job.tenant)  # as logs name it (its digest, private keys)
        self._stops: dict[str, _Stop] = {}
        self._lock = threading.Lock()  # a batch's records run on several threads

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        scope = self._stopped_scope(delivery.job)
        if scope is None or self._take_probe(scope):
            return rest(delivery)
        stop = self._stops.get(scope)
        if stop is None:  # over since: another instance saw SES send
            return rest(delivery)
        outcome = Outcome.QUOTA_EXHAUSTED if stop.kind == Stop.QUOTA else Outcome.SES_STOPPED
        return Redeliver(delivery.result(outcome, f"parked: SES stopped {self._describe(scope)} ({stop.reason})"))

    def heard(self, outcome: SendOutcome, job: ParsedJob, deadline: Deadline | None = None) -> None:
        """What SES said of a send: a stop to learn, or a send accepted that ends the stops of its scopes."""
        if isinstance(outcome, Refused) and outcome.stop is not None:
            scope, board_scope = ACCOUNT, ACCOUNT
            tenant = outcome.stopped_tenant
            if tenant is not None:
                scope, board_scope = tenant_scope(tenant), tenant_scope(self._label(job) or tenant)
            self._learn(scope, board_scope, outcome.stop, outcome.reason)
        elif isinstance(outcome, Accepted) and self._stops:
            for scope in self._scopes(job):
                self._resume(scope)

    def _scopes(self, job: ParsedJob) -> list[str]:
        return [ACCOUNT] + ([tenant_scope(job.tenant)] if job.tenant is not None else [])

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
        if self._board is None:
            return True
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

    def _learn(self, scope: str, board_scope: str, kind: str, reason: str) -> None:
        probe_at = self._clock.now_ms() + PROBE_EVERY_MS
        if self._board is not None:
            with contextlib.suppress(ClientError, BotoCoreError):  # else this instance keeps its own minute
                probe_at = self._board.stopped(board_scope, kind, reason)
        with self._lock:
            self._stops[scope] = _Stop(kind, reason, probe_at, board_scope)

    def _resume(self, scope: str) -> None:
        with self._lock:
            stop = self._stops.pop(scope, None)
        if stop is not None and self._board is not None:
            # If this fails, the others learn it at their next probe, which SES then accepts.
            with contextlib.suppress(ClientError, BotoCoreError):
                self._board.resumed(stop.board_scope)

    @staticmethod
    def _describe(scope: str) -> str:
        return "the account's sending" if scope == ACCOUNT else "this tenant's sending"


def _live(item: dict[str, Any]) -> bool:
    return SesStopItem.STOPPED_AT in item and SesStopItem.RESUMED_AT not in item and SesStopItem.PROBE_AT in item


def _old_item(error: ClientError) -> dict[str, Any] | None:
    """The item a failed conditional write found (ReturnValuesOnConditionCheckFailure), None when absent."""
    item = error.response.get("Item")
    return item if isinstance(item, dict) else None


def _conditional(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code", "")) == "ConditionalCheckFailedException"


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _n(value: int) -> dict[str, str]:
    return {"N": str(value)}
