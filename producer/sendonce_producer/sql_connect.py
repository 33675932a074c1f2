"""The relay's database, from a DSN: ``postgresql://`` (psycopg 3), ``mysql://`` (PyMySQL) or ``sqlite:///path``,
and SQLAlchemy's ``dialect+driver://`` forms of those drivers (``postgresql+psycopg://``, ``mysql+pymysql://``,
``sqlite+pysqlite:///``), and libpq's keyword/value form (``host=db dbname=shop``), as an application's settings
hold them. A socket is ``?host=/path`` (PostgreSQL) or
``?unix_socket=/path`` (MySQL).

The drivers are the producer's extras (``sendonce-producer[postgresql]``, ``[mysql]``); sqlite3 is Python's own.
Every error here says what to fix, for the console command's one error line, and no line shows a secret of the
DSN (:func:`masked`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from .sql_dialects import DIALECTS, Dialect

SCHEMES = {"postgresql": "postgresql", "postgres": "postgresql", "mysql": "mysql", "sqlite": "sqlite"}
# SQLAlchemy's driver names for the drivers the relay uses: a dialect+driver scheme naming another is refused.
DRIVERS = {"postgresql": ("psycopg",), "mysql": ("pymysql",), "sqlite": ("pysqlite",)}
MASK = "***"
# Where a DSN holds a secret, in any of its forms: a user part's password (user:password@, malformed URLs
# included), and the password-like parameters of a query or of libpq's keyword/value form (quoted or not).
USER_PASSWORD = re.compile(r"[^\s:/@?&]+:([^\s@/]+)@")
SECRET_PARAMETER = re.compile(r"\b(password|sslpassword|passwd)\s*=\s*(?:'([^']*)'|([^\s&;]+))")
PASSFILE = re.compile(r"\b(passfile)\s*=\s*(?:'([^']*)'|([^\s&;]+))")
# libpq's keyword/value form of a PostgreSQL DSN: "host=db dbname=shop user=app".
KEYWORD_FORM = re.compile(r"^\s*[a-z_]+\s*=")
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
    shown = shown_dsn(dsn)
    if "://" not in dsn and KEYWORD_FORM.match(dsn):  # libpq's keyword/value form: host=... dbname=...
        return _postgresql(_driver("postgresql", shown), dsn, shown)
    try:
        scheme, _, driver = urlsplit(dsn).scheme.partition("+")
        urlsplit(dsn).port  # noqa: B018  (a port that is no number is refused here, with the fix)
    except ValueError as error:
        raise DatabaseError(f"--dsn {shown!r}: {error}; write it as postgresql://user:password@host:5432/db, "
                            "mysql://user:password@host:3306/db or sqlite:///path") from None
    name = SCHEMES.get(scheme)
    if name is None:
        raise DatabaseError(f"--dsn {shown!r}: the scheme must be postgresql://, mysql:// or sqlite:///path (or "
                            "SQLAlchemy's postgresql+psycopg://, mysql+pymysql://, sqlite+pysqlite:///)")
    if driver and driver not in DRIVERS[name]:
        raise DatabaseError(f"--dsn {shown!r}: the relay connects with {', '.join(DRIVERS[name])} for {name}, not "
                            f"{driver}: write {scheme}+{DRIVERS[name][0]}:// or {scheme}://")
    dsn = scheme + dsn[len(urlsplit(dsn).scheme):]  # the driver's own form: without SQLAlchemy's +driver
    parts = urlsplit(dsn)
    if name == "sqlite":
        return _sqlite(parts.path, parts.netloc, shown)
    module = _driver(name, shown)
    if name == "postgresql":
        return _postgresql(module, dsn, shown)
    return _mysql(module, parts, shown)


def _driver(name: str, shown: str) -> Any:
    module_name, extra = EXTRAS[name]
    try:
        return __import__(module_name)
    except ImportError:
        raise DatabaseError(f"--dsn {shown!r} needs the {module_name} driver: pip install '{extra}'") from None


def secrets_of(dsn: str) -> list[str]:
    """Every secret ``dsn`` holds, whatever its form (a URL, a malformed one, libpq's keyword/value form): the
    password of a ``user:password@`` part, the password-like parameters, and the passwords of a libpq ``passfile``
    it names (the file's lines, host:port:database:user:password)."""
    found = [match.group(1) for match in USER_PASSWORD.finditer(dsn)]
    found += [match.group(2) or match.group(3) for match in SECRET_PARAMETER.finditer(dsn)]
    found += [unquote(secret) for secret in found]
    for match in PASSFILE.finditer(dsn):
        path = Path(unquote(match.group(2) or match.group(3))).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:  # unreadable: the driver says so, and the file's content is in no line
            continue
        found += [line.rsplit(":", 1)[-1] for line in lines if line.count(":") >= 4 and not line.startswith("#")]
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def shown_dsn(dsn: str) -> str:
    """``dsn`` as a line may show it: each secret's place written ***, the rest as given."""
    shown = USER_PASSWORD.sub(lambda match: match.group(0).replace(match.group(1), MASK), dsn)
    shown = SECRET_PARAMETER.sub(lambda match: f"{match.group(1)}={MASK}", shown)
    return masked(shown, dsn)


def masked(text: str, dsn: str) -> str:
    """``text`` with every secret of ``dsn`` in it replaced by ***: any line the relay or its driver prints."""
    for secret in secrets_of(dsn):
        text = text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    return text


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
