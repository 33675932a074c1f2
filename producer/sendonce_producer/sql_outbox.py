"""The SQL outbox: record the intent to send in the same PostgreSQL, MySQL or SQLite transaction as the change
causing it; ``sendonce-outbox-relay`` moves each committed row to the job queue.

Plain DB-API 2.0: pass the cursor of the transaction your business write is in (psycopg 3, psycopg2, PyMySQL,
sqlite3; with SQLAlchemy, the raw connection's cursor; with Django, ``django.db.connection.cursor()``).

    with connection.transaction():                      # psycopg 3
        cursor.execute("INSERT INTO orders ...")
        add(cursor, EmailJob(dedupe_key=dedupe_key(order_id, "receipt"), ...))
"""

from __future__ import annotations

import time
from typing import Any

from sendonce_contract.message import InvalidMessage, parse_job

from .job import EmailJob, InvalidJob
from .sql_dialects import DEFAULT_TABLE, _ddl, check_table, dialect_of, schema_statements

__all__ = ["DEFAULT_TABLE", "add", "schema", "schema_statements"]

MAX_GROUP_ID = 128  # SQS's MessageGroupId, and the MySQL column's size


def schema(dialect: str, table: str = DEFAULT_TABLE) -> str:
    """The outbox table's DDL for ``postgresql``, ``mysql`` or ``sqlite``: the key unique, the job's JSON, when it
    was added, its relay state and attempts, and the index the relay scans. The same text ships as
    ``sendonce_producer/sql/<dialect>.sql`` for a migration tool (Alembic, Django migrations, Flyway)."""
    return _ddl(dialect, table)


def add(cursor: Any, job: EmailJob, *, table: str = DEFAULT_TABLE, group_id: str | None = None,
        dialect: str | None = None) -> bool:
    """Write ``job`` to the outbox in the cursor's transaction; True when it added the row, False when its key was
    already there (the same order event applied twice), which never fails your business write.

    The job is checked against the consumer's contract first (``InvalidJob``, nothing written). Never commits and
    never rolls back: the row exists exactly when your transaction commits. On PostgreSQL it also notifies the
    relay, which PostgreSQL delivers only on commit. ``group_id`` is the FIFO message group (the first recipient
    unless given), as for ``enqueue``. ``dialect`` only when the cursor's driver is not one of those above.
    """
    body = job.to_message()
    try:  # what is stored is what was validated: the body the consumer will parse
        parse_job(body, sqs_message_id="")
    except InvalidMessage as error:
        raise InvalidJob(f"{job.dedupe_key!r}: {error.reason}") from None
    if group_id is not None and not 1 <= len(group_id) <= MAX_GROUP_ID:
        raise InvalidJob(f"{job.dedupe_key!r}: group_id must be 1 to {MAX_GROUP_ID} characters, as SQS takes it")
    check_table(table)
    spoken = dialect_of(cursor, dialect)
    parameters: list[Any] = [job.dedupe_key, body, group_id, time.time_ns() // 1_000_000]
    if spoken.name == "postgresql":
        parameters.append(table)  # the channel the relay listens on
    cursor.execute(spoken.insert(table), parameters)
    return bool(cursor.rowcount == 1)
