"""The SQL outbox: record the intent to send in the same PostgreSQL, MySQL or SQLite transaction as the change
causing it; ``sendonce-outbox-relay`` moves each committed row to the job queue.

Pass what your business write goes through: a DB-API 2.0 cursor or connection (psycopg 3, psycopg2, PyMySQL,
sqlite3; Django's ``django.db.connection``), or a SQLAlchemy ``Connection`` or ``Session``; the row joins that
transaction.

    with connection.transaction():                      # psycopg 3
        cursor.execute("INSERT INTO orders ...")
        add(cursor, EmailJob(dedupe_key=dedupe_key(order_id, "receipt"), ...))

The job is an :class:`EmailJob` or the JSON job itself as a mapping (``{"dedupeKey": ..., "from": ...}``, the body
the consumer parses), checked by the consumer's own parser either way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
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


def add(transaction: Any, job: EmailJob | Mapping[str, Any], *, table: str = DEFAULT_TABLE,
        group_id: str | None = None, dialect: str | None = None) -> bool:
    """Write ``job`` to the outbox in ``transaction`` (a DB-API cursor or connection, or a SQLAlchemy
    ``Connection`` or ``Session``); True when it added the row, False when its key was already there (the same
    order event applied twice), which never fails your business write.

    The job is checked against the consumer's contract first (``InvalidJob``), and ``transaction`` is one of those
    kinds (``TypeError`` naming them): either way nothing is written. Never commits and never rolls back: the row
    exists exactly when your transaction commits. On a connection it opens a cursor of its own and closes it. On
    PostgreSQL it also notifies the relay, which PostgreSQL delivers only on commit. ``group_id`` is the FIFO
    message group (the first recipient unless given), as for ``enqueue``. ``dialect`` only when the driver is not
    one of those above.
    """
    body = _body(job)
    try:  # what is stored is what was validated: the body the consumer will parse, and the key it parsed
        key = parse_job(body, sqs_message_id="").dedupe_key
    except InvalidMessage as error:
        raise InvalidJob(f"{_named(job)}: {error.reason}") from None
    if group_id is not None and not 1 <= len(group_id) <= MAX_GROUP_ID:
        raise InvalidJob(f"{key!r}: group_id must be 1 to {MAX_GROUP_ID} characters, as SQS takes it")
    check_table(table)
    with _cursor_of(transaction) as cursor:
        spoken = dialect_of(cursor, dialect)
        parameters: list[Any] = [key, body, group_id, time.time_ns() // 1_000_000]
        if spoken.name == "postgresql":
            parameters.append(table)  # the channel the relay listens on
        cursor.execute(spoken.insert(table), parameters)
        return spoken.added(cursor)


ACCEPTED = ("a DB-API cursor or connection (psycopg, PyMySQL, sqlite3, Django's connection), or a SQLAlchemy "
            "Connection or Session")


@contextmanager
def _cursor_of(transaction: Any) -> Iterator[Any]:
    """A DB-API cursor in ``transaction``'s transaction: the cursor itself, or one opened here (and closed)."""
    if type(transaction).__module__.split(".")[0] == "sqlalchemy":
        transaction = _sqlalchemy_dbapi_connection(transaction)
    if _is_cursor(transaction):
        yield transaction
        return
    if not callable(getattr(transaction, "cursor", None)) or not callable(getattr(transaction, "commit", None)):
        raise TypeError(f"add takes {ACCEPTED}, not a {type(transaction).__module__}."
                        f"{type(transaction).__qualname__}")
    cursor = transaction.cursor()
    try:
        yield cursor
    finally:
        cursor.close()


def _sqlalchemy_dbapi_connection(transaction: Any) -> Any:
    """The DB-API connection a SQLAlchemy ``Session`` (its transaction's, begun if none was) or ``Connection``
    runs on; anything else of SQLAlchemy's (an ``Engine``: no transaction of yours) is refused."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(transaction, Session | scoped_session):
        transaction = transaction.connection()
    if not isinstance(transaction, Connection):
        raise TypeError(f"add takes {ACCEPTED}, not a {type(transaction).__module__}.{type(transaction).__qualname__}")
    return transaction.connection  # the pool's proxy of the DB-API connection


def _is_cursor(found: Any) -> bool:
    """A DB-API cursor: it executes and counts rows, and opens no cursor of its own (a connection does, and
    sqlite3's and psycopg's connections execute too)."""
    return (callable(getattr(found, "execute", None)) and hasattr(found, "rowcount")
            and not callable(getattr(found, "cursor", None)))


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
