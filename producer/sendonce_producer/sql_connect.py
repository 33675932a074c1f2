"""The relay's database, from a DSN: ``postgresql://`` (psycopg 3), ``mysql://`` (PyMySQL) or ``sqlite:///path``.

The drivers are the producer's extras (``sendonce-producer[postgresql]``, ``[mysql]``); sqlite3 is Python's own.
Every error here says what to fix, for the console command's one error line.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .sql_dialects import DIALECTS, Dialect

SCHEMES = {"postgresql": "postgresql", "postgres": "postgresql", "mysql": "mysql", "sqlite": "sqlite"}
EXTRAS = {"postgresql": ("psycopg", "sendonce-producer[postgresql]"), "mysql": ("pymysql", "sendonce-producer[mysql]")}
CONNECT_TIMEOUT_S = 10
SQLITE_BUSY_TIMEOUT_S = 30  # a relay waits this long for SQLite's one writer (the app, or another relay)


class DatabaseError(Exception):
    """The DSN is wrong, its driver is missing, or the database cannot be reached; the message says the fix."""


@dataclass(frozen=True)
class Database:
    """Where the outbox lives: ``connect()`` opens a connection the relay owns (transactions begun explicitly or
    by the driver), ``errors`` are the driver's DB-API errors, ``shown`` is the DSN without its password."""

    dialect: Dialect
    connect: Callable[[], Any]
    errors: tuple[type[BaseException], ...]
    shown: str
    listen: Callable[[], Any] | None = None  # PostgreSQL: an autocommit connection for LISTEN


def database(dsn: str) -> Database:
    """The database ``dsn`` names; ``DatabaseError`` for a scheme, a driver or a form it cannot be."""
    parts = urlsplit(dsn)
    name = SCHEMES.get(parts.scheme)
    shown = _without_password(dsn)
    if name is None:
        raise DatabaseError(f"--dsn {shown!r}: the scheme must be postgresql://, mysql:// or sqlite:///path")
    if name == "sqlite":
        return _sqlite(parts.path, parts.netloc, shown)
    module_name, extra = EXTRAS[name]
    try:
        module = __import__(module_name)
    except ImportError:
        raise DatabaseError(f"--dsn {shown!r} needs the {module_name} driver: pip install '{extra}'") from None
    if name == "postgresql":
        return _postgresql(module, dsn, shown)
    return _mysql(module, parts, shown)


def _without_password(dsn: str) -> str:
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    return dsn.replace(f":{parts.password}@", ":***@", 1)


def _postgresql(psycopg: Any, dsn: str, shown: str) -> Database:
    # The relay's own session commits without waiting for its WAL flush: a relay killed anywhere loses nothing
    # of it (the server has the commit), and a server crash loses at most its last marks (3 x wal_writer_delay,
    # 0.6 s by default), whose rows are then relayed again and absorbed by the consumer's ledger. Waiting for each
    # batch's fsync cost a tenth of the relay's rate (BENCHMARKS section 14). The application's own
    # transactions, and so its outbox rows, keep the server's setting.
    def connect() -> Any:
        return psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, options="-c synchronous_commit=off")

    def listen() -> Any:
        return psycopg.connect(dsn, connect_timeout=CONNECT_TIMEOUT_S, autocommit=True)

    return Database(DIALECTS["postgresql"], connect, (psycopg.Error,), shown, listen)


def _mysql(pymysql: Any, parts: Any, shown: str) -> Database:
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    database_name = unquote(parts.path.lstrip("/"))
    if not database_name:
        raise DatabaseError(f"--dsn {shown!r} names no database: mysql://user:password@host:3306/DATABASE")
    options: dict[str, Any] = {
        "host": parts.hostname or "localhost", "port": parts.port or 3306, "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""), "database": database_name, "charset": "utf8mb4",
        "connect_timeout": CONNECT_TIMEOUT_S, "autocommit": False,
        # Read committed: the claim locks the rows it returns and no gap beside them, so the app's inserts never
        # wait for a batch the relay is sending.
        "init_command": "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    }
    if "unix_socket" in query:
        options["unix_socket"] = query["unix_socket"]

    def connect() -> Any:
        return pymysql.connect(**options)

    return Database(DIALECTS["mysql"], connect, (pymysql.Error,), shown)


def _sqlite(path: str, host: str, shown: str) -> Database:
    # sqlite:///orders.db is orders.db in the working folder, sqlite:////srv/orders.db an absolute path (as
    # SQLAlchemy reads them).
    if host or not path.startswith("/") or len(path) < 2:
        raise DatabaseError(f"--dsn {shown!r}: a SQLite DSN is sqlite:///relative/path.db or sqlite:////absolute.db")
    file = Path(unquote(path[1:]))
    if not file.is_file():
        raise DatabaseError(f"--dsn {shown!r}: there is no database file {str(file)!r}: create it with the outbox "
                            "table (sendonce-outbox-relay --schema sqlite), or fix the path")

    def connect() -> Any:
        # Autocommit at the driver: the relay begins each transaction itself, with BEGIN IMMEDIATE.
        return sqlite3.connect(f"file:{quote(str(file))}?mode=rw", uri=True, isolation_level=None,
                               timeout=SQLITE_BUSY_TIMEOUT_S, check_same_thread=False)

    return Database(DIALECTS["sqlite"], connect, (sqlite3.Error,), shown)
