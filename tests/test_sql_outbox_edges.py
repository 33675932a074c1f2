"""The SQL outbox as a newcomer meets it, through the installed console command and the public API, on real
PostgreSQL, SQLite and MariaDB/MySQL: the relay checks its queues at start, takes SQLAlchemy's DSN forms and shows
no secret of its DSN; ``add`` takes a cursor, a connection, or SQLAlchemy's Connection or Session, and nothing else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import boto3
import pytest

from sendonce_producer import EmailJob
from sendonce_producer.sql_connect import masked
from sendonce_producer.sql_outbox import add

pytestmark = pytest.mark.slow
RELAY = [sys.executable, "-m", "sendonce_producer.relay_cli"]
PREFIX = "sendonce-outbox-relay: error: "
DRIVER_FORMS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "sqlite": "sqlite+pysqlite"}


def job(n: int | str) -> EmailJob:
    return EmailJob(dedupe_key=f"order-{n}:receipt", sender="Shop <receipts@example.com>", to=[f"c{n}@example.org"],
                    subject=f"Receipt order-{n}", text="Thanks.")


def new_queue() -> str:
    return str(boto3.client("sqs").create_queue(QueueName=f"jobs-{os.urandom(4).hex()}")["QueueUrl"])


def messages(url: str) -> list[dict[str, Any]]:
    sqs, found = boto3.client("sqs"), []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages"):
        found += batch
    return found


def relay(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RELAY, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env=env or {**os.environ})


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(PREFIX) and done.stdout == "", (line, done.stdout)
    return line


def commit_one(db: Any, n: int | str) -> None:
    connection = db.connect()
    try:
        add(connection.cursor(), job(n))
        connection.commit()
    finally:
        connection.close()


# -- 1. the queues, checked at start ---------------------------------------------------------------------------------

def test_a_missing_or_unreachable_queue_is_one_line_at_start_even_with_nothing_pending(outbox_db, aws):
    real = new_queue()
    missing = real.rsplit("/", 1)[0] + "/no-such-queue"
    # An empty outbox, --once and a long-running relay alike: the queue is asked about before anything is relayed.
    for args in (["--once"], []):
        line = one_error_line(relay("--dsn", outbox_db.dsn, "--queue-url", missing, *args, timeout=30))
        assert f"SQS has no queue at {missing}" in line and "queue.queue_url" in line
    line = one_error_line(relay("--dsn", outbox_db.dsn, "--queue-url", real, "--urgent-queue-url", missing, "--once"))
    assert f"SQS has no queue at {missing}" in line
    # No answer from SQS at all (a wrong endpoint): the URL is named, and the rows stay pending.
    commit_one(outbox_db, 1)
    unreachable = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
    line = one_error_line(relay("--dsn", outbox_db.dsn, "--queue-url", real, "--once", env=unreachable))
    assert f"SQS could not be asked about the queue {real}" in line
    # No region to sign for (a queue URL off AWS, nothing in the environment): the same one line, no traceback.
    regionless = {name: value for name, value in os.environ.items() if name not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    line = one_error_line(relay("--dsn", outbox_db.dsn, "--queue-url", real, "--once",
                                env={**regionless, "AWS_CONFIG_FILE": os.devnull}))
    assert f"SQS could not be asked about the queue {real}" in line and "set AWS_REGION" in line
    assert messages(real) == [] and [row["state"] for row in outbox_db.rows()] == ["pending"]
    done = relay("--dsn", outbox_db.dsn, "--queue-url", real, "--once")  # the same relay, the queue there
    assert done.returncode == 0, done.stderr
    assert [json.loads(m["Body"])["dedupeKey"] for m in messages(real)] == ["order-1:receipt"]


# -- 2. SQLAlchemy's DSN forms ---------------------------------------------------------------------------------------

def test_the_relay_takes_sqlalchemy_s_dialect_and_driver_form_of_its_own_drivers_and_names_them_for_others(
        outbox_db, aws):
    url = new_queue()
    commit_one(outbox_db, 1)
    scheme = outbox_db.dsn.split("://", 1)[0]
    as_sqlalchemy = DRIVER_FORMS[outbox_db.dialect] + outbox_db.dsn[len(scheme):]
    done = relay("--dsn", as_sqlalchemy, "--queue-url", url, "--once")
    assert done.returncode == 0, done.stderr
    assert [json.loads(m["Body"])["dedupeKey"] for m in messages(url)] == ["order-1:receipt"]
    assert [row["state"] for row in outbox_db.rows()] == ["relayed"]
    other = {"postgresql": "postgresql+psycopg2", "mysql": "mysql+mysqldb", "sqlite": "sqlite+aiosqlite"}
    line = one_error_line(relay("--dsn", other[outbox_db.dialect] + outbox_db.dsn[len(scheme):], "--queue-url", url))
    assert f"the relay connects with {DRIVER_FORMS[outbox_db.dialect].split('+')[1]}" in line


# -- 3. no secret in any line ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("outbox_db", ["postgresql"], indirect=True)
def test_no_line_the_relay_prints_shows_a_secret_of_its_dsn(outbox_db, aws, tmp_path):
    url = new_queue()
    passfile = tmp_path / "pgpass"
    passfile.write_text("127.0.0.1:*:*:postgres:passfile-secret-3\n", encoding="utf-8")
    passfile.chmod(0o600)
    base = outbox_db.dsn.split("?")[0]
    user_part = base.replace("postgres@", "postgres:user-secret-0@", 1)
    cases = {  # a missing table: the error line shows the DSN
        f"{user_part}": "postgres:***@",
        f"{base}?password=param-secret-1": "password=***",
        f"{base}?sslpassword=param-secret-2&sslmode=disable": "sslpassword=***",
        f"{base}?passfile={passfile}": f"passfile={passfile}",
    }
    host, port = base.split("@", 1)[1].split("/", 1)[0].split(":")
    keywords = f"host={host} port={port} user=postgres password=keyword-secret-4 dbname={base.rsplit('/', 1)[1]}"
    cases[keywords] = "password=***"  # libpq's keyword/value form: taken, and masked
    outbox_db.execute("DROP TABLE sendonce_outbox")
    for dsn, shown in cases.items():
        line = one_error_line(relay("--dsn", dsn, "--queue-url", url, "--once"))
        assert "secret" not in line and shown in line and "is missing or incomplete" in line, line
    # Forms the relay refuses, or a driver fails on: the line names the fix and still shows no secret.
    for dsn in ("u:refused-secret-5@127.0.0.1/db", "postgresql:u:refused-secret-6@h/db",
                "postgresql://u:refused-secret-7@[::1/shop", "jdbc:postgresql://u:refused-secret-8@h/db"):
        line = one_error_line(relay("--dsn", dsn, "--queue-url", url, "--once"))
        assert "secret" not in line and ("--dsn" in line or "cannot reach the database" in line), line
    # A driver's own message can hold what the DSN held: every line is masked, the passfile's passwords included.
    dsn = f"{base}?passfile={passfile}&password=param-secret-1"
    assert masked(f"FATAL: passfile-secret-3 and param-secret-1 and {dsn}", dsn).count("secret") == 0


# -- 4. what add takes -----------------------------------------------------------------------------------------------

def test_add_takes_a_cursor_a_connection_or_sqlalchemy_s_connection_or_session_and_nothing_else(outbox_db, aws):
    import sqlalchemy
    from sqlalchemy.orm import Session

    connection = outbox_db.connect()
    try:
        assert add(connection, job(1)) is True  # a DB-API connection: add opens and closes its own cursor
        assert add(connection.cursor(), job(1)) is False
        engine = sqlalchemy.create_engine(DRIVER_FORMS[outbox_db.dialect] + ":" + outbox_db.dsn.split(":", 1)[1])
        for wrong in (object(), "cursor", engine, job(9)):
            with pytest.raises(TypeError, match=r"a DB-API cursor or connection .* or a SQLAlchemy Connection or"):
                add(wrong, job(2))
        connection.commit()
    finally:
        connection.close()
    with engine.begin() as sqlalchemy_connection:
        assert add(sqlalchemy_connection, job(3)) is True
    with Session(engine) as session, session.begin():
        assert add(session, job(4)) is True
    with Session(engine) as session:
        add(session, job(5))
        session.rollback()  # the row was in the session's transaction: gone with it
    engine.dispose()
    assert sorted(row["dedupe_key"] for row in outbox_db.rows()) == [
        "order-1:receipt", "order-3:receipt", "order-4:receipt"]


def test_the_relay_prints_the_schema_as_the_shipped_file_holds_it():
    from importlib import resources

    from sendonce_producer.sql_outbox import schema

    for dialect in ("postgresql", "mysql", "sqlite"):
        done = relay("--schema", dialect)
        assert done.returncode == 0, done.stderr
        shipped = resources.files("sendonce_producer").joinpath("sql", f"{dialect}.sql").read_text(encoding="utf-8")
        assert done.stdout == shipped == schema(dialect)
    assert "outbox_orders" in relay("--schema", "sqlite", "--table", "outbox_orders").stdout
