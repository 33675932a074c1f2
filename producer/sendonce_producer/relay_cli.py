"""``sendonce-outbox-relay --dsn DSN --queue-url URL [--once]``: relays the SQL outbox to the job queue.

One JSON line per batch on stdout. SIGTERM (how ECS and Kubernetes stop a task) and Ctrl-C finish the batch in
hand and exit 0. A bad DSN, an unreachable database, a missing table, or a queue SQS has not (or will not
describe with these credentials) is one error line and exit code 2. No line shows a secret of the DSN.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, NoReturn

from .sql_connect import DatabaseError, database, masked
from .sql_dialects import DEFAULT_TABLE, DIALECTS
from .sql_outbox import schema
from .sql_relay import (
    RETENTION_S,
    DatabaseUnavailable,
    OutboxRelay,
    QueueMissing,
    QueueUnreachable,
    RelaySettings,
    first_line,
    print_line,
)

PROG = "sendonce-outbox-relay"
USAGE_ERROR = 2


class _OneLineParser(argparse.ArgumentParser):
    """A usage error is one line and exit code 2, with the fix (argparse would print its whole usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{PROG}: error: {message}; see {PROG} --help\n")


def parser() -> argparse.ArgumentParser:
    found = _OneLineParser(prog=PROG, description="Relay the sendonce SQL outbox to the job queue.")
    found.add_argument("--dsn", help="postgresql://user:password@host:5432/db (a socket: ?host=/run/postgresql), "
                                     "mysql://user:password@host:3306/db (?unix_socket=/path) or sqlite:///path/to.db; "
                                     "SQLAlchemy's postgresql+psycopg://, mysql+pymysql:// and sqlite+pysqlite:/// "
                                     "and PostgreSQL's 'host=... dbname=...' too")
    found.add_argument("--queue-url", help="the job queue (the construct's queue.queue_url)")
    found.add_argument("--urgent-queue-url", help="the urgent lane's queue (the construct's urgent_queue.queue_url, "
                                              "with urgent_lane): urgent jobs go there")
    found.add_argument("--table", default=DEFAULT_TABLE, help=f"the outbox table (default {DEFAULT_TABLE})")
    found.add_argument("--once", action="store_true", help="relay what is pending, then exit")
    found.add_argument("--batch-size", type=int, default=RelaySettings.batch_size,
                       help=f"rows per transaction, the most a kill before its commit re-sends (default "
                            f"{RelaySettings.batch_size}: one SendMessageBatch)")
    found.add_argument("--poll-interval", type=float, default=RelaySettings.poll_interval_s,
                       help="seconds between polls when no notification wakes the relay (default "
                            f"{RelaySettings.poll_interval_s:g})")
    found.add_argument("--retention-days", type=float, default=RETENTION_S / 86_400,
                       help=f"delete relayed rows after this many days (default {RETENTION_S / 86_400:g})")
    found.add_argument("--key-secret-arn", help="with key_privacy, the construct's key_secret: a job's tenant is "
                                                "relayed as its digest")
    found.add_argument("--schema", choices=sorted(DIALECTS), help="print the outbox table's DDL and exit")
    return found


def main(argv: Sequence[str] | None = None, sqs: Any | None = None) -> int:
    args = parser().parse_args(argv)
    if args.schema:
        try:
            print(schema(args.schema, args.table), end="")  # the shipped file's text, its comments included
        except ValueError as error:
            return _fail(str(error))
        return 0
    if not args.dsn or not args.queue_url:
        return _fail("--dsn and --queue-url are both needed (or --schema DIALECT to print the DDL)")
    dsn = args.dsn

    def say(line: dict[str, Any]) -> None:  # no line shows a secret of the DSN
        print_line(json.loads(masked(json.dumps(line), dsn)))

    def fail(message: str) -> int:
        return _fail(masked(message, dsn))

    if not args.queue_url.startswith(("https://", "http://")):
        return fail(f"--queue-url {args.queue_url!r} is not a queue URL: pass the construct's queue.queue_url")
    if args.urgent_queue_url is not None and not args.urgent_queue_url.startswith(("https://", "http://")):
        return fail(f"--urgent-queue-url {args.urgent_queue_url!r} is not a queue URL: pass the construct's "
                    "urgent_queue.queue_url")
    try:
        settings = RelaySettings(args.queue_url, args.table, args.batch_size, args.poll_interval,
                                 args.retention_days * 86_400, urgent_queue_url=args.urgent_queue_url,
                                 key_secret_arn=args.key_secret_arn)
        found = database(args.dsn)
    except (ValueError, DatabaseError) as error:
        return fail(str(error))
    relay = OutboxRelay(found, settings, sqs=sqs, log=say)
    try:
        return _run(relay, args.once, say, fail)
    finally:
        relay.close()


def _run(relay: OutboxRelay, once: bool, say: Callable[[dict[str, Any]], None], fail: Callable[[str], int]
         ) -> int:
    shown, table, dialect = relay.database.shown, relay.settings.table, relay.database.dialect.name
    try:
        relay.connection()
    except relay.database.errors as error:
        return fail(f"cannot reach the database {shown}: {first_line(error)}; check the host, port, user, password "
                     "and that the server is running")
    try:
        relay.check()
    except relay.database.errors as error:
        return fail(f"the outbox table {table!r} is missing or incomplete in {shown} ({first_line(error)}); create "
                     f"it with `{PROG} --schema {dialect}` (or sendonce_producer/sql/{dialect}.sql)")
    try:
        relay.check_queues()
    except (QueueMissing, QueueUnreachable) as error:
        return fail(f"{error} (nothing was sent)")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())  # the batch in hand is finished, then the loop ends
    say({"event": "started", "table": table, "dialect": dialect, "queue_url": relay.settings.queue_url})
    try:
        totals = relay.drain(stop) if once else relay.run(stop)
    except DatabaseUnavailable as error:
        return fail(f"the database {shown} failed: {error}; nothing was lost: the batch's rows stay pending")
    except QueueMissing as error:
        return fail(f"SQS has no queue at {relay.settings.queue_url} ({error}); pass the construct's queue.queue_url "
                     "(nothing was sent: the rows stay pending)")
    say({"event": "stopped", **asdict(totals)})
    return 1 if once and _left_pending(relay) else 0


def _left_pending(relay: OutboxRelay) -> bool:
    """After --once: whether rows are still pending (SQS kept refusing them); the exit code says so."""
    cursor = relay.connection().cursor()
    try:
        cursor.execute(relay.database.dialect.count_pending(relay.settings.table))
        return bool(cursor.fetchone()[0])
    finally:
        relay.connection().rollback()


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
