"""The SQL outbox: record the intent to send in the same PostgreSQL, MySQL or SQLite transaction as the change
causing it; ``sendonce-outbox-relay`` moves each committed row to the job queue.

Plain DB-API 2.0: pass the cursor of the transaction your business write is in (psycopg 3, psycopg2, PyMySQL,
sqlite3; with SQLAlchemy, the raw connection's cursor; with Django, ``django.db.connection.cursor()``).

    with connection.transaction():                      # psycopg 3
        cursor.execute("INSERT INTO orders ...")
        add(cursor, EmailJob(dedupe_key=dedupe_key(order_id, "receipt"), ...))

The job is an :class:`EmailJob` or the JSON job itself as a mapping (``{"dedupeKey": ..., "from": ...}``, the body
the consumer parses), checked by the consumer's own parser either way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from sendonce_contract.message import InvalidMessage, parse_job
from sendonce_contract.schema import DEDUPE_KEY

from .job import EmailJob, InvalidJob
from .sql_dialects import DEFAULT_TABLE, _ddl, check_table, dialect_of, schema_statements

__all__ = ["DEFAULT_TABLE", "add", "schema", "schema_statements"]

MAX_GROUP_ID = 128  # SQS's MessageGroupId, and the MySQL column's size


def schema(dialect: str, table: str = DEFAULT_TABLE) -> str:
    """The outbox table's DDL for ``postgresql``, ``mysql`` or ``sqlite``: the key unique, the job's JSON, when it
    was added, its relay state and attempts, and the index the relay scans. The same text ships as
    ``sendonce_producer/sql/<dialect>.sql`` for a migration tool (Alembic, Django migrations, Flyway)."""
    return _ddl(dialect, table)


def add(cursor: Any, job: EmailJob | Mapping[str, Any], *, table: str = DEFAULT_TABLE, group_id: str | None = None,
        dialect: str | None = None) -> bool:
    """Write ``job`` to the outbox in the cursor's transaction; True when it added the row, False when its key was
    already there (the same order event applied twice), which never fails your business write.

    The job is checked against the consumer's contract first (``InvalidJob``, nothing written). Never commits and
    never rolls back: the row exists exactly when your transaction commits. On PostgreSQL it also notifies the
    relay, which PostgreSQL delivers only on commit. ``group_id`` is the FIFO message group (the first recipient
    unless given), as for ``enqueue``. ``dialect`` only when the cursor's driver is not one of those above.
    """
    body = _body(job)
    try:  # what is stored is what was validated: the body the consumer will parse, and the key it parsed
        key = parse_job(body, sqs_message_id="").dedupe_key
    except InvalidMessage as error:
        raise InvalidJob(f"{_named(job)}: {error.reason}") from None
    if group_id is not None and not 1 <= len(group_id) <= MAX_GROUP_ID:
        raise InvalidJob(f"{key!r}: group_id must be 1 to {MAX_GROUP_ID} characters, as SQS takes it")
    check_table(table)
    spoken = dialect_of(cursor, dialect)
    parameters: list[Any] = [key, body, group_id, time.time_ns() // 1_000_000]
    if spoken.name == "postgresql":
        parameters.append(table)  # the channel the relay listens on
    cursor.execute(spoken.insert(table), parameters)
    return spoken.added(cursor)


def _body(job: Any) -> str:
    if isinstance(job, EmailJob):
        return job.to_message()
    if isinstance(job, Mapping):
        try:
            return json.dumps(job, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as error:  # a value JSON has no form for: the consumer could never parse it
            raise InvalidJob(f"{_named(job)}: the job is not JSON: {error}") from None
    raise TypeError(f"add takes an EmailJob or the JSON job as a mapping (a dict of the contract's fields), not a "
                    f"{type(job).__module__}.{type(job).__qualname__}")


def _named(job: Any) -> str:
    key = job.dedupe_key if isinstance(job, EmailJob) else job.get(DEDUPE_KEY)
    return repr(key) if isinstance(key, str) else "the job"
