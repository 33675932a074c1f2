"""The SQL outbox's statements, one set per database: the one place its table's columns, states and each dialect's
way to insert without conflict and to claim rows are spelled. ``sql_outbox`` (the producer's side) and
``sql_relay`` (the relay) both build their SQL here."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

DEFAULT_TABLE = "sendonce_outbox"
PENDING, RELAYED, FAILED = "pending", "relayed", "failed"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
COLUMNS = ("id", "dedupe_key", "job", "group_id", "created_at_ms", "state", "attempts", "relayed_at_ms", "failure")


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the outbox needs; ``mark`` is the driver's placeholder (``%s`` or ``?``)."""

    name: str
    mark: str = "%s"

    def with_mark(self, mark: str) -> Dialect:
        return Dialect(self.name, mark)

    def insert(self, table: str) -> str:
        """The row's insert, which adds nothing (and raises nothing) when the key is there; on PostgreSQL it also
        notifies the relay, delivered only when the transaction commits. Parameters: key, job, group, created_at_ms
        (and the channel on PostgreSQL). One row back (PostgreSQL) or a rowcount of 1 when it added the row."""
        values = ", ".join([self.mark] * 4)
        columns = "(dedupe_key, job, group_id, created_at_ms)"
        if self.name == "postgresql":
            return (f"WITH added AS (INSERT INTO {table} {columns} VALUES ({values}) ON CONFLICT (dedupe_key) "
                    f"DO NOTHING RETURNING id) SELECT pg_notify({self.mark}, '') FROM added")
        if self.name == "mysql":
            # MySQL has no ON CONFLICT DO NOTHING. ON DUPLICATE KEY UPDATE absorbs the duplicate key alone (the
            # only unique key but the id); INSERT IGNORE would turn every other error of the statement into a
            # warning and insert adjusted values. The no-op update leaves the row as it was.
            return f"INSERT INTO {table} {columns} VALUES ({values}) ON DUPLICATE KEY UPDATE id = id"
        return f"INSERT INTO {table} {columns} VALUES ({values}) ON CONFLICT (dedupe_key) DO NOTHING"

    def added(self, cursor: Any) -> bool:
        """Whether :meth:`insert` added its row. On MySQL the row count of a duplicate depends on the connection's
        CLIENT_FOUND_ROWS flag (0 without it, 1 with it), so the insert id tells instead: 0 (or None) when the
        update path ran, whatever the flag."""
        if self.name == "mysql":
            return bool(cursor.lastrowid)
        return bool(cursor.rowcount == 1)

    def claim(self, table: str, limit: int) -> str:
        """The oldest pending rows, locked for this transaction; another relay skips them (SQLite has one writer:
        the relay's BEGIN IMMEDIATE already keeps every other relay out)."""
        lock = "" if self.name == "sqlite" else " FOR UPDATE SKIP LOCKED"
        return (f"SELECT id, dedupe_key, job, group_id, created_at_ms FROM {table} WHERE state = '{PENDING}' "
                f"ORDER BY id LIMIT {int(limit)}{lock}")

    def mark_relayed(self, table: str, count: int) -> str:
        return (f"UPDATE {table} SET state = '{RELAYED}', relayed_at_ms = {self.mark}, attempts = attempts + 1 "
                f"WHERE id IN ({', '.join([self.mark] * count)})")

    def mark_kept(self, table: str, count: int) -> str:
        return f"UPDATE {table} SET attempts = attempts + 1 WHERE id IN ({', '.join([self.mark] * count)})"

    def mark_failed(self, table: str) -> str:
        """Parameters: when, the reason, the row's id."""
        return (f"UPDATE {table} SET state = '{FAILED}', relayed_at_ms = {self.mark}, failure = {self.mark}, "
                f"attempts = attempts + 1 WHERE id = {self.mark}")

    def delete_relayed(self, table: str, limit: int) -> str:
        """Up to ``limit`` relayed rows older than the parameter (epoch ms), oldest first."""
        if self.name == "mysql":  # MySQL refuses a LIMIT in a subquery of the table it deletes from
            return (f"DELETE FROM {table} WHERE state = '{RELAYED}' AND relayed_at_ms < {self.mark} "
                    f"ORDER BY id LIMIT {int(limit)}")
        return (f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE state = '{RELAYED}' "
                f"AND relayed_at_ms < {self.mark} ORDER BY id LIMIT {int(limit)})")

    def count_pending(self, table: str) -> str:
        return f"SELECT COUNT(*) FROM {table} WHERE state = '{PENDING}'"

    def probe(self, table: str) -> str:
        """Fails unless the table exists with every column the relay reads and writes."""
        return f"SELECT {', '.join(COLUMNS)} FROM {table} WHERE 1 = 0"


DIALECTS = {name: Dialect(name, "?" if name == "sqlite" else "%s") for name in ("postgresql", "mysql", "sqlite")}
# The driver modules DB-API cursors come from, by their top-level package.
_DRIVERS = {"psycopg": "postgresql", "psycopg2": "postgresql", "pg8000": "postgresql", "pymysql": "mysql",
            "MySQLdb": "mysql", "mysql": "mysql", "sqlite3": "sqlite"}
_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def check_table(table: str) -> str:
    """``table`` itself when it is a plain SQL identifier (it is written into the statements, never quoted)."""
    if not _IDENTIFIER.fullmatch(table):
        raise ValueError(f"table {table!r} must be a plain SQL identifier: a letter or _, then letters, digits or _, "
                         "at most 48 characters (set the schema with the connection's search path)")
    return table


def dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"dialect {name!r} is not one of {', '.join(DIALECTS)}") from None


def dialect_of(cursor: Any, name: str | None = None) -> Dialect:
    """The database behind a DB-API cursor, and its driver's placeholder: psycopg 3, psycopg2, PyMySQL, sqlite3,
    a raw SQLAlchemy connection's cursor, and Django's cursor (which takes ``%s`` on every database)."""
    module = type(cursor).__module__.split(".")[0]
    if module == "django":
        return dialect(name or str(cursor.db.vendor)).with_mark("%s")
    found = name or _DRIVERS.get(module)
    if found is None:
        raise TypeError(f"cannot tell the database of a {type(cursor).__module__}.{type(cursor).__name__}: pass "
                        f"dialect= one of {', '.join(DIALECTS)}")
    style = getattr(sys.modules.get(module), "paramstyle", None)
    return dialect(found).with_mark(_MARKS.get(str(style), dialect(found).mark))


def schema_statements(name: str, table: str = DEFAULT_TABLE) -> list[str]:
    """The DDL of :func:`schema`, one statement each (for drivers that run one statement per call)."""
    text = _ddl(name, table)
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [statement.strip() for statement in "\n".join(lines).split(";") if statement.strip()]


def _ddl(name: str, table: str) -> str:
    dialect(name)
    ddl = resources.files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8")
    return ddl.replace(DEFAULT_TABLE, check_table(table))
