"""The SQL outbox's relay: moves each committed outbox row to the job queue, and nothing it has not sent.

A batch is one transaction: claim the oldest pending rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL and MySQL, so
several relays never hold one row; SQLite's single writer on SQLite), send them with ``SendMessageBatch`` (the body
``add`` stored, the FIFO group and deduplication id of the contract's one rule, as ``enqueue`` gives them), mark
exactly the rows SQS accepted as relayed, and commit. A relay killed anywhere loses nothing: its transaction rolls
back and the rows are claimed again. A kill after SQS accepted but before the commit sends those rows again; the
consumer's dedupe ledger absorbs the copy (the consumer counts it as a duplicate), so each email still goes once.
By default a transaction holds one ``SendMessageBatch`` (10 rows), so a kill re-sends at most those 10; a larger
``batch_size`` sends its rows ten to a call at once, and a kill re-sends up to the whole claim. While a batch is
sent, the next one is claimed on a second connection (not on SQLite, whose one writer the batch holds), but sent
only once the first batch's marks have committed: the claim's read and the rows' parsing leave the time between two
sends, and no more than one batch is ever sent without its marks committed.

SQS throttling or an outage keeps the rows pending and backs off; a row SQS refuses for good (too large, invalid
characters) or that is not a job the contract parses is marked failed with the reason and never blocks the rows
behind it. Relayed rows are deleted after a retention, in small batches.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from sendonce_contract.fifo import SEND_AT_ON_FIFO, fifo_message_ids
from sendonce_contract.message import ContractTooNew, InvalidMessage, parse_job
from sendonce_contract.priority import priority_of, queue_for
from sendonce_contract.schema import DEDUPE_KEY
from sendonce_contract.sqs_limits import SQS_MAX_BATCH_ENTRIES, batches
from sendonce_contract.tenant import body_tenant, tenant_group_id

from .private_keys import digester
from .sql_connect import Database
from .sql_dialects import DEFAULT_TABLE, check_table

BATCH = SQS_MAX_BATCH_ENTRIES
RETENTION_S = 7 * 86_400
MIN_RETENTION_S = 3600
RETENTION_BATCH = 500  # relayed rows deleted per transaction: short locks, a small undo log
RETENTION_EVERY_S = 300.0
WAIT_SLICE_S = 0.25  # how often a waiting relay looks at its stop flag (SIGTERM)
# Refusals about the batch's content: isolate the entry; alone, it is refused for good.
CONTENT_CODES = frozenset({
    "InvalidParameterValue", "InvalidMessageContents", "MessageTooLong", "BatchRequestTooLong",
    "AWS.SimpleQueueService.BatchRequestTooLong", "InvalidAttributeValue", "InvalidAttributeName",
})
ACCEPTED, REFUSED, KEPT = "accepted", "refused", "kept"


@dataclass(frozen=True)
class RelaySettings:
    """``queue_url`` is the construct's ``queue.queue_url`` (a name ending in .fifo is a FIFO queue);
    ``urgent_queue_url`` its ``urgent_queue.queue_url`` with ``urgent_lane``, where urgent jobs go;
    ``key_secret_arn`` its ``key_secret`` with ``key_privacy``, so a job's tenant is relayed as its digest."""

    queue_url: str
    table: str = DEFAULT_TABLE
    # Rows per transaction, sent ten per SendMessageBatch: the most a kill before the commit re-sends.
    batch_size: int = BATCH
    poll_interval_s: float = 1.0  # the longest a committed row waits when no notification wakes the relay
    retention_s: float = RETENTION_S
    max_backoff_s: float = 20.0
    urgent_queue_url: str | None = None
    key_secret_arn: str | None = None

    def __post_init__(self) -> None:
        check_table(self.table)
        if not 1 <= self.batch_size <= 1000:
            raise ValueError(f"the batch size ({self.batch_size}) must be 1 to 1000")
        if not 0 < self.poll_interval_s <= 300:
            raise ValueError(f"the poll interval ({self.poll_interval_s:g} s) must be above 0 and at most 300 s")
        if not self.retention_s >= MIN_RETENTION_S:
            raise ValueError(f"the retention ({self.retention_s / 86_400:g} days) must be at least "
                             f"{MIN_RETENTION_S // 3600} hour: a relayed row's key is what makes the same order event "
                             "added again a no-op")

    @property
    def fifo(self) -> bool:
        return self.queue_url.endswith(".fifo")


@dataclass(frozen=True)
class BatchReport:
    """One batch: rows claimed, relayed (SQS accepted), refused (marked failed), kept (pending, for a later
    batch), again (relayed before by this relay without the mark committing), and the oldest row's age."""

    claimed: int = 0
    relayed: int = 0
    refused: int = 0
    kept: int = 0
    again: int = 0
    lag_ms: int = 0
    ms: int = 0
    refusals: tuple[tuple[int, str], ...] = ()  # (row id, reason)
    kept_reason: str = ""

    def line(self) -> dict[str, Any]:
        found = {name: value for name, value in asdict(self).items() if name not in ("refusals", "kept_reason")}
        if self.kept_reason:
            found["kept_reason"] = self.kept_reason
        return {"event": "batch", **found}


@dataclass(frozen=True)
class _Row:
    id: int
    key: str
    body: str
    group_id: str | None
    created_at_ms: int


@dataclass(frozen=True)
class _Prepared:
    """A batch's rows made ready to send: the refused ones with why, the rest as SendMessageBatch calls."""

    refused: dict[int, tuple[str, str]]
    chunks: list[tuple[str, list[tuple[_Row, dict[str, Any]]]]]


@dataclass(frozen=True)
class _Claimed:
    """The next batch, claimed in its own transaction (and made ready) while the batch before it was being sent."""

    connection: Any
    cursor: Any
    rows: list[_Row]
    prepared: _Prepared


@dataclass
class Totals:
    relayed: int = 0
    refused: int = 0
    kept: int = 0
    again: int = 0
    deleted: int = 0
    batches: int = 0

    def add(self, report: BatchReport) -> None:
        self.relayed += report.relayed
        self.refused += report.refused
        self.kept += report.kept
        self.again += report.again
        self.batches += 1 if report.claimed else 0


class DatabaseUnavailable(Exception):
    """The database failed during a batch; the batch's transaction is gone (rolled back), nothing was marked."""


class QueueMissing(Exception):
    """SQS says the queue URL names no queue: a setting to fix, not an outage to wait out. The batch's transaction
    was rolled back: its rows stay pending."""


class QueueUnreachable(Exception):
    """SQS cannot be asked about the queue with these credentials and this endpoint (none found, access denied, no
    answer): a setting to fix before relaying anything."""


# SQS's codes for a queue URL that names no queue (the JSON protocol's and the query protocol's).
QUEUE_MISSING_CODES = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


def default_sqs(queue_url: str) -> Any:
    """An SQS client for the relay: one retry of its own (the relay backs off and retries a batch itself), short
    timeouts so a stop is not held up, and the region from the queue URL unless the environment names one."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"mode": "standard", "total_max_attempts": 2}, connect_timeout=5, read_timeout=10,
                    max_pool_connections=BATCH)
    host = queue_url.split("/")[2] if queue_url.count("/") >= 3 else ""
    parts = host.split(".")
    region = parts[1] if len(parts) >= 4 and parts[0] == "sqs" and parts[-2] == "amazonaws" else None
    session = boto3.session.Session()
    return session.client("sqs", config=config, region_name=session.region_name or region)


def print_line(line: dict[str, Any]) -> None:
    print(json.dumps(line, separators=(",", ":")), flush=True)


class OutboxRelay:
    """Relays one outbox table to one job queue. ``relay_batch()`` is one transaction; ``drain()`` relays until
    nothing is pending; ``run(stop)`` relays until ``stop`` is set, woken by PostgreSQL's notifications and polling
    every ``poll_interval_s`` (a lost notification only delays). ``log`` gets one dict per batch (and per
    retention sweep, and per error)."""

    def __init__(self, database: Database, settings: RelaySettings, *, sqs: Any | None = None,
                 log: Callable[[dict[str, Any]], None] = print_line, clock: Callable[[], float] = time.time) -> None:
        self.database = database
        self.settings = settings
        self._sqs = sqs
        self.log = log
        self.clock = clock
        self.totals = Totals()
        self._connection: Any = None
        self._spare: Any = None  # the connection the next batch is claimed on while this one is sent
        self._ahead: _Claimed | None = None
        self._listener: Any = None
        self._unconfirmed: set[int] = set()  # rows SQS accepted whose mark did not commit
        self._streak = 0  # batches in a row that kept rows back (the backoff's exponent)
        self._retained_at = float("-inf")
        self._senders = ThreadPoolExecutor(max_workers=BATCH, thread_name_prefix="outbox-send")
        self._claimer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-claim")

    # -- the connection -------------------------------------------------------------------------------------------

    def connection(self) -> Any:
        if self._connection is None:
            self._connection = self.database.connect()
        return self._connection

    def check(self) -> None:
        """Raises the driver's error unless the database answers and has the outbox table with its columns."""
        cursor = self.connection().cursor()
        try:
            cursor.execute(self.database.dialect.probe(self.settings.table))
            cursor.fetchall()
        finally:
            self._end(commit=False)

    @property
    def sqs(self) -> Any:
        """The SQS client, made at its first use (a missing region is then the queue check's one error, after the
        database's)."""
        if self._sqs is None:
            self._sqs = default_sqs(self.settings.queue_url)
        return self._sqs

    @sqs.setter
    def sqs(self, client: Any) -> None:
        self._sqs = client

    def check_queues(self) -> None:
        """Ask SQS about the job queue (and the urgent one, when given) before relaying anything: ``QueueMissing``
        when a URL names no queue, ``QueueUnreachable`` when SQS cannot be asked (credentials, access, endpoint),
        each naming the URL. A queue that disappears later keeps its rows pending (``relay_batch``)."""
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

        for url in filter(None, (self.settings.queue_url, self.settings.urgent_queue_url)):
            try:
                self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            except ClientError as error:
                code = str(error.response.get("Error", {}).get("Code", ""))
                if code in QUEUE_MISSING_CODES:
                    raise QueueMissing(f"SQS has no queue at {url} ({code}); pass the construct's queue.queue_url "
                                       "(urgent_queue.queue_url for --urgent-queue-url)") from error
                raise QueueUnreachable(f"SQS refused to describe the queue {url}: {code}: {_message(error)}; use "
                                       "credentials that may use it (the construct's grant_enqueue)") from error
            except NoRegionError as error:
                raise QueueUnreachable(f"SQS could not be asked about the queue {url}: no AWS region; set "
                                       "AWS_REGION (or AWS_DEFAULT_REGION) to the queue's region") from error
            except NoCredentialsError as error:
                raise QueueUnreachable(f"SQS could not be asked about the queue {url}: no AWS credentials; give the "
                                       "relay a role, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") from error
            except BotoCoreError as error:
                raise QueueUnreachable(f"SQS could not be asked about the queue {url}: {error}; check the URL, "
                                       "AWS_ENDPOINT_URL if set, and the network") from error

    def close(self) -> None:
        self._ahead = None  # its connection closes below: the server rolls its claim back, nothing of it was sent
        for name in ("_connection", "_spare", "_listener"):
            connection = getattr(self, name)
            setattr(self, name, None)
            if connection is not None:
                with contextlib.suppress(Exception):  # a broken connection: nothing more to do with it
                    connection.close()
        self._claimer.shutdown(wait=True)
        self._senders.shutdown(wait=True)

    def _begin(self) -> Any:
        cursor = self.connection().cursor()
        if self.database.dialect.name == "sqlite":
            cursor.execute("BEGIN IMMEDIATE")  # the one writer, taken before the claim's read
        return cursor

    def _end(self, commit: bool) -> None:
        connection = self._connection
        if connection is None:
            return
        if self.database.dialect.name == "sqlite" and not connection.in_transaction:
            return
        if commit:
            connection.commit()
        else:
            connection.rollback()

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # already broken
                connection.close()  # the server rolls back whatever this connection held

    def _drop_ahead(self) -> None:
        """Give the claimed-ahead batch back (nothing of it was sent): its connection closes and rolls it back."""
        spare, self._spare, self._ahead = self._spare, None, None
        if spare is not None:
            with contextlib.suppress(Exception):  # already broken
                spare.close()

    def _claim(self, cursor: Any) -> list[_Row]:
        cursor.execute(self.database.dialect.claim(self.settings.table, self.settings.batch_size))
        return [self._row(found) for found in cursor.fetchall()]

    def _claim_ahead(self) -> _Claimed | None:
        """The next batch, claimed on the spare connection and made ready while this one is sent (in another
        thread: the claim waits on the database, the parsing fits the send's wait for SQS). Its rows are locked
        (another relay skips them) but not sent before this batch's marks commit. A database error here is the
        next batch's: it claims anew, and meets the error if it lasts."""
        try:
            if self._spare is None:
                self._spare = self.database.connect()
            cursor = self._spare.cursor()
            rows = self._claim(cursor)
        except self.database.errors:
            return None
        return _Claimed(self._spare, cursor, rows, self._prepare(rows))

    # -- one batch ------------------------------------------------------------------------------------------------

    def relay_batch(self) -> BatchReport:
        """Claim, send and mark one batch in one transaction. ``DatabaseUnavailable`` when the database failed:
        then no row of the batch was marked (those SQS took are counted ``again`` when claimed next)."""
        started = time.monotonic()
        sent: list[int] = []
        try:
            ahead, self._ahead = self._ahead, None
            if ahead is not None:  # claimed while the last batch was sent: its connection is this batch's now
                self._spare, self._connection = self._connection, ahead.connection
                cursor, rows, prepared = ahead.cursor, ahead.rows, ahead.prepared
            else:
                cursor = self._begin()
                rows = self._claim(cursor)
                prepared = self._prepare(rows)
            if not rows:
                self._end(commit=False)
                return BatchReport()
            # A backlog: the next batch is there to claim (SQLite's one writer is this batch's).
            claiming = (self._claimer.submit(self._claim_ahead) if len(rows) == self.settings.batch_size
                        and self.database.dialect.name != "sqlite" else None)
            try:
                outcomes = self._send(prepared)
                sent = [row.id for row in rows if outcomes[row.id][0] == ACCEPTED]
                report = self._mark(cursor, rows, outcomes, started)
                self._end(commit=True)
            finally:
                self._ahead = claiming.result() if claiming is not None else None
                if claiming is not None and self._ahead is None:
                    self._drop_ahead()
        except QueueMissing:
            self._end(commit=False)  # nothing was sent: every row of the claim stays pending
            self._drop_ahead()
            raise
        except self.database.errors as error:
            self._unconfirmed.update(sent)
            self._drop_connection()
            self._drop_ahead()
            raise DatabaseUnavailable(first_line(error)) from error
        self._unconfirmed.difference_update(sent)
        self._streak = self._streak + 1 if report.kept else 0
        self.totals.add(report)
        self.log(report.line())
        for row_id, reason in report.refusals:
            self.log({"event": "refused", "id": row_id, "reason": reason})
        return report

    def _row(self, found: Any) -> _Row:
        row_id, key, body, group_id, created_at_ms = found
        if isinstance(key, bytes | bytearray):  # MySQL's VARBINARY key
            key = bytes(key).decode("utf-8", errors="replace")
        return _Row(int(row_id), str(key), str(body), None if group_id is None else str(group_id), int(created_at_ms))

    def _mark(self, cursor: Any, rows: list[_Row], outcomes: dict[int, tuple[str, str]], started: float
              ) -> BatchReport:
        dialect, table = self.database.dialect, self.settings.table
        now_ms = int(self.clock() * 1000)
        by_kind: dict[str, list[int]] = {ACCEPTED: [], REFUSED: [], KEPT: []}
        for row in rows:
            by_kind[outcomes[row.id][0]].append(row.id)
        if by_kind[ACCEPTED]:
            cursor.execute(dialect.mark_relayed(table, len(by_kind[ACCEPTED])), [now_ms, *by_kind[ACCEPTED]])
        if by_kind[KEPT]:
            cursor.execute(dialect.mark_kept(table, len(by_kind[KEPT])), by_kind[KEPT])
        refusals = tuple((row_id, outcomes[row_id][1]) for row_id in by_kind[REFUSED])
        if refusals:
            cursor.executemany(dialect.mark_failed(table), [(now_ms, reason, row_id) for row_id, reason in refusals])
        kept_reasons = sorted({outcomes[row_id][1] for row_id in by_kind[KEPT]})
        return BatchReport(
            claimed=len(rows), relayed=len(by_kind[ACCEPTED]), refused=len(refusals), kept=len(by_kind[KEPT]),
            again=sum(1 for row in rows if row.id in self._unconfirmed and outcomes[row.id][0] == ACCEPTED),
            lag_ms=max(0, now_ms - min(row.created_at_ms for row in rows)),
            ms=int((time.monotonic() - started) * 1000), refusals=refusals, kept_reason="; ".join(kept_reasons))

    # -- sending --------------------------------------------------------------------------------------------------

    def _entry(self, row: _Row) -> dict[str, Any] | str:
        """The SendMessageBatch entry for ``row`` (without its Id), or why the row can never be sent."""
        try:
            parsed = parse_job(row.body, sqs_message_id="")
        except InvalidMessage as error:
            return f"not a job the contract parses: {error.reason}"
        except ContractTooNew:
            parsed = None  # a newer producer's job: the consumer it was written for parses it
        if parsed is not None and parsed.dedupe_key != row.key:
            return f"the job's {DEDUPE_KEY} differs from the row's dedupe_key ({row.key!r})"
        entry: dict[str, Any] = {"MessageBody": row.body}
        if self.settings.fifo:
            if parsed is not None and parsed.send_at_ms is not None:
                return SEND_AT_ON_FIFO
            entry.update(fifo_message_ids(row.body, row.key, f"outbox row {row.id} at {row.created_at_ms}",
                                          row.group_id if parsed is not None else row.group_id or row.key))
        tenant = parsed.tenant if parsed is not None else body_tenant(row.body)
        tenant_group = tenant_group_id(tenant, digester(self.settings.key_secret_arn) if tenant else None,
                                       self.settings.fifo)
        if tenant_group is not None:  # SQS fair queues, as the producer's enqueue gives it
            entry["MessageGroupId"] = tenant_group
        return entry

    def _prepare(self, rows: list[_Row]) -> _Prepared:
        refused: dict[int, tuple[str, str]] = {}
        by_queue: dict[str, list[tuple[_Row, dict[str, Any]]]] = {}
        for row in rows:
            entry = self._entry(row)
            if isinstance(entry, str):
                refused[row.id] = (REFUSED, entry)
            else:
                by_queue.setdefault(self._queue_of(row), []).append((row, entry))
        return _Prepared(refused, [(queue, chunk) for queue, ready in by_queue.items() for chunk in batches(ready)])

    def _send(self, prepared: _Prepared) -> dict[int, tuple[str, str]]:
        outcomes = dict(prepared.refused)
        chunks = prepared.chunks
        if self.settings.fifo or len(chunks) == 1:  # a FIFO group's jobs go in their order
            results = [self._send_chunk(chunk, queue) for queue, chunk in chunks]
        else:
            results = list(self._senders.map(lambda sent: self._send_chunk(sent[1], sent[0]), chunks))
        for result in results:
            outcomes.update(result)
        return outcomes

    def _queue_of(self, row: _Row) -> str:
        """The urgent lane's queue for an urgent job (when the pipeline has one), else the job queue."""
        return queue_for(priority_of(row.body), self.settings.queue_url, self.settings.urgent_queue_url)

    def _send_chunk(self, chunk: list[tuple[_Row, dict[str, Any]]], queue_url: str) -> dict[int, tuple[str, str]]:
        from botocore.exceptions import BotoCoreError, ClientError

        entries = [{"Id": str(index), **entry} for index, (_, entry) in enumerate(chunk)]
        try:
            response = self.sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if code in QUEUE_MISSING_CODES:
                raise QueueMissing(f"{code}: {_message(error)}") from error
            if code in CONTENT_CODES and status < 500:
                if len(chunk) > 1:  # find the entry it was about: each alone
                    return {k: v for one in chunk for k, v in self._send_chunk([one], queue_url).items()}
                return {chunk[0][0].id: (REFUSED, f"SQS refused it: {code}: {_message(error)}")}
            return {row.id: (KEPT, f"SQS: {code or status}") for row, _ in chunk}
        except BotoCoreError as error:  # no answer: SQS may or may not have it; sent again, absorbed by the ledger
            return {row.id: (KEPT, f"SQS unreachable: {type(error).__name__}") for row, _ in chunk}
        outcomes = {chunk[int(ok["Id"])][0].id: (ACCEPTED, "") for ok in response.get("Successful", [])}
        for failed in response.get("Failed", []):
            row = chunk[int(failed["Id"])][0]
            code = str(failed.get("Code", ""))
            reason = f"{code}: {failed.get('Message', '')}".strip(": ")
            # The entry's own fault is for good; a key's trouble (KMS) is the queue's, as is SQS's own.
            permanent = bool(failed.get("SenderFault")) and not code.startswith("KMS")
            outcomes[row.id] = (REFUSED, f"SQS refused it: {reason}") if permanent else (KEPT, f"SQS: {code}")
        for row, _ in chunk:
            outcomes.setdefault(row.id, (KEPT, "SQS answered nothing for it"))
        return outcomes

    # -- the loop -------------------------------------------------------------------------------------------------

    def backoff_s(self) -> float:
        """How long to wait after a batch that kept rows back (throttling, an outage): doubling, with jitter."""
        if not self._streak:
            return 0.0
        return float(min(self.settings.max_backoff_s, 0.2 * 2 ** (self._streak - 1)) * random.uniform(0.5, 1.0))

    def retain(self) -> int:
        """Delete relayed rows older than the retention, a small batch per transaction; how many went."""
        dialect, table = self.database.dialect, self.settings.table
        cutoff_ms = int((self.clock() - self.settings.retention_s) * 1000)
        deleted = 0
        try:
            for _ in range(20):  # at most 10,000 rows per sweep; the next sweep goes on
                cursor = self._begin()
                cursor.execute(dialect.delete_relayed(table, RETENTION_BATCH), [cutoff_ms])
                count = max(0, int(cursor.rowcount))
                self._end(commit=True)
                deleted += count
                if count < RETENTION_BATCH:
                    break
        except self.database.errors as error:
            self._drop_connection()
            raise DatabaseUnavailable(first_line(error)) from error
        self.totals.deleted += deleted
        self._retained_at = time.monotonic()
        if deleted:
            self.log({"event": "retention", "deleted": deleted})
        return deleted

    def drain(self, stop: threading.Event | None = None, max_idle_batches: int = 5) -> Totals:
        """Relay until a batch finds nothing pending (or ``stop`` is set). Rows SQS keeps refusing for
        ``max_idle_batches`` batches in a row, with backoff between, end it too (they stay pending)."""
        stop = stop or threading.Event()
        fruitless = 0
        while not stop.is_set():
            report = self.relay_batch()
            if not report.claimed:
                break
            fruitless = fruitless + 1 if report.kept == report.claimed else 0
            if fruitless >= max_idle_batches:
                break
            if report.kept:
                stop.wait(self.backoff_s())
        if self.settings.retention_s >= 0 and not stop.is_set():
            self.retain()
        return self.totals

    def run(self, stop: threading.Event) -> Totals:
        """Relay until ``stop`` is set; the batch in hand is finished first (SIGTERM's promise). A database that
        fails is reconnected with backoff, logged once per failure."""
        failures = 0
        while not stop.is_set():
            try:
                self._listen()
                report = self.relay_batch()
                if time.monotonic() - self._retained_at >= RETENTION_EVERY_S:
                    self.retain()
                failures = 0
            except DatabaseUnavailable as error:
                failures += 1
                self.log({"event": "error", "error": f"database: {error}", "retry_in_s": min(30, 2 ** failures)})
                stop.wait(min(30, 2**failures))
                continue
            if report.kept:
                stop.wait(self.backoff_s())
            elif report.claimed < self.settings.batch_size:
                self._wait(self.settings.poll_interval_s, stop)
        return self.totals

    def _listen(self) -> None:
        if self.database.listen is None or self._listener is not None:
            return
        try:
            listener = self.database.listen()
            listener.execute(f'LISTEN "{self.settings.table}"')
            self._listener = listener
        except self.database.errors as error:  # polling goes on; the next batch tries again
            self.log({"event": "error", "error": f"LISTEN failed, polling only: {error}"})

    def _wait(self, timeout_s: float, stop: threading.Event) -> None:
        """Until a notification, ``timeout_s``, or ``stop``."""
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self._listener is None:
                stop.wait(min(WAIT_SLICE_S, left))
                continue
            try:
                if any(True for _ in self._notifications(min(WAIT_SLICE_S, left))):
                    return
            except self.database.errors:
                listener, self._listener = self._listener, None
                with contextlib.suppress(Exception):  # already broken
                    listener.close()

    def _notifications(self, timeout_s: float) -> Iterator[Any]:
        yield from self._listener.notifies(timeout=timeout_s, stop_after=1)


def _message(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Message", "")).strip()


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
