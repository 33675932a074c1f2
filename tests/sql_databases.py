"""The SQL outbox's real databases for the tests: the embedded PostgreSQL (one server per test session), SQLite
files, and the MariaDB/MySQL server `make mysql-server` starts (CI runs it; elsewhere its tests skip while no
server answers)."""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sendonce_producer.sql_connect import database
from sendonce_producer.sql_dialects import schema_statements

# The server `make mysql-server` sets up: its user may create any database named sendonce_test... .
_MYSQL_SERVER = "mysql://sendonce:sendonce@127.0.0.1:3306"
# Each run's worker (pytest-xdist) has a database of its own, made when its first MySQL test starts and dropped as
# it ends, as the workers' tests run at once and each resets its tables; and two runs on one machine (make test beside
# make test-stress) each their own.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")[:12] or str(os.getpid())
_MYSQL_DATABASE = "_".join(filter(None, ["sendonce_test", _RUN, os.environ.get("PYTEST_XDIST_WORKER")]))
_GIVEN_DSN = os.environ.get("SENDONCE_MYSQL_TEST_DSN")  # a server of your own: used as it is
MYSQL_DSN = _GIVEN_DSN or f"{_MYSQL_SERVER}/{_MYSQL_DATABASE}"
_made: list[str] = []
ORDERS_DDL = "CREATE TABLE orders (id VARCHAR(64) PRIMARY KEY, customer VARCHAR(200) NOT NULL)"


@dataclass
class OutboxDatabase:
    """One dialect's database with a fresh outbox table (and an orders table, the app's business write)."""

    dialect: str
    dsn: str
    path: Path | None = None  # SQLite's file

    def connect(self) -> Any:
        """A connection as the application opens it: its driver's defaults, transactions begun by the driver."""
        if self.dialect == "sqlite":
            return sqlite3.connect(str(self.path), timeout=30)
        return database(self.dsn).connect()

    def reset(self, table: str = "sendonce_outbox") -> None:
        connection = self.connect()
        try:
            cursor = connection.cursor()
            for name in (table, "orders"):
                cursor.execute(f"DROP TABLE IF EXISTS {name}")
            for statement in [*schema_statements(self.dialect, table), ORDERS_DDL]:
                cursor.execute(statement)
            connection.commit()
        finally:
            connection.close()

    def rows(self, table: str = "sendonce_outbox") -> list[dict[str, Any]]:
        connection = self.connect()
        try:
            cursor = connection.cursor()
            cursor.execute(f"SELECT id, dedupe_key, state, attempts, failure, relayed_at_ms FROM {table} ORDER BY id")
            names = [d[0] for d in cursor.description]
            found = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            connection.rollback()
        finally:
            connection.close()
        for row in found:
            if isinstance(row["dedupe_key"], bytes):
                row["dedupe_key"] = row["dedupe_key"].decode()
        return found

    def execute(self, sql: str, parameters: Any = ()) -> None:
        connection = self.connect()
        try:
            connection.cursor().execute(sql.replace("%s", "?") if self.dialect == "sqlite" else sql, parameters)
            connection.commit()
        finally:
            connection.close()


def mysql_or_skip() -> str:
    """The MySQL test DSN once its server answers; under CI a missing server fails the test, it never skips."""
    try:
        if _GIVEN_DSN is None and not _made:
            _make_run_database()
        database(MYSQL_DSN).connect().close()
    except Exception as error:
        message = f"no MySQL server at {MYSQL_DSN} ({error}): run `make mysql-server`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return MYSQL_DSN


def _make_run_database() -> None:
    """This run's worker's database, made in the server's own test database and dropped when the worker exits."""
    connection = database(f"{_MYSQL_SERVER}/sendonce_test").connect()
    try:
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {_MYSQL_DATABASE}")
    finally:
        connection.close()
    _made.append(_MYSQL_DATABASE)
    atexit.register(_drop_run_database)


def _drop_run_database() -> None:
    with contextlib.suppress(Exception):  # the server gone first: nothing left to tidy
        connection = database(f"{_MYSQL_SERVER}/sendonce_test").connect()
        try:
            connection.cursor().execute(f"DROP DATABASE IF EXISTS {_MYSQL_DATABASE}")
        finally:
            connection.close()
