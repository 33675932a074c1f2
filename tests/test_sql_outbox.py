"""The SQL outbox, against real databases (the embedded PostgreSQL, SQLite, and MariaDB/MySQL in CI) and the
emulator's SQS over HTTP: `add` in the app's own transaction, and `sendonce-outbox-relay` moving what committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from importlib import resources
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sendonce_producer import EmailJob, InvalidJob
from sendonce_producer.enqueue import message_request
from sendonce_producer.sql_connect import database
from sendonce_producer.sql_outbox import add, schema
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings

pytestmark = pytest.mark.slow
RELAY = [sys.executable, "-m", "sendonce_producer.relay_cli"]


def receipt(n: int | str, **overrides: Any) -> EmailJob:
    fields: dict[str, Any] = {"dedupe_key": f"order-{n}:receipt", "sender": "Shop <receipts@example.com>",
                              "to": [f"Customer{n} <c{n}@Example.org>"], "subject": f"Receipt order-{n}",
                              "text": "Thanks."}
    fields.update(overrides)
    return EmailJob(**fields)


def place_order(db: Any, n: int | str, commit: bool = True, twice: bool = False, **job: Any) -> list[bool]:
    """The app's business write and its receipt in one transaction."""
    connection = db.connect()
    try:
        cursor = connection.cursor()
        mark = "?" if db.dialect == "sqlite" else "%s"
        cursor.execute(f"INSERT INTO orders (id, customer) VALUES ({mark}, {mark})", (f"order-{n}", f"c{n}"))
        added = [add(cursor, receipt(n, **job)) for _ in range(2 if twice else 1)]
        connection.commit() if commit else connection.rollback()
        return added
    finally:
        connection.close()


def queue(name: str = "jobs", fifo: bool = False, **attributes: str) -> str:
    if fifo:
        attributes["FifoQueue"] = "true"
    return str(boto3.client("sqs").create_queue(QueueName=name + (".fifo" if fifo else ""),
                                                Attributes=attributes)["QueueUrl"])


def received(url: str, bound_s: float = 10, expect: int | None = None) -> list[dict[str, Any]]:
    """Every message on the queue (hidden once seen), polled with a bound until ``expect`` arrived."""
    sqs, found = boto3.client("sqs"), []
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                    MessageSystemAttributeNames=["All"]).get("Messages", [])
        found += batch
        if not batch and (expect is None or len(found) >= expect):
            break
    return found


def relay_command(db: Any, url: str, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*RELAY, "--dsn", db.dsn, "--queue-url", url, *args], capture_output=True, text=True,
                          timeout=60, check=False, **kwargs)


def lines(output: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_the_shipped_sql_files_are_the_schema_and_a_table_name_renames_every_object():
    for dialect in ("postgresql", "mysql", "sqlite"):
        shipped = resources.files("sendonce_producer").joinpath("sql", f"{dialect}.sql").read_text()
        assert schema(dialect) == shipped
        renamed = schema(dialect, table="shop_outbox")
        assert "sendonce_outbox" not in renamed and "CREATE TABLE shop_outbox" in renamed
    with pytest.raises(ValueError, match="plain SQL identifier"):
        schema("postgresql", table="outbox; DROP TABLE orders")
    with pytest.raises(ValueError, match="dialect 'oracle' is not one of postgresql, mysql, sqlite"):
        schema("oracle")


def test_add_writes_one_row_per_key_and_the_same_event_twice_never_fails_the_business_write(outbox_db, aws):
    assert place_order(outbox_db, 1, twice=True) == [True, False]
    assert place_order(outbox_db, 2) == [True]
    assert [row["dedupe_key"] for row in outbox_db.rows()] == ["order-1:receipt", "order-2:receipt"]
    assert all(row["state"] == "pending" for row in outbox_db.rows())


def test_a_rolled_back_transaction_leaves_no_row_and_add_never_commits(outbox_db, aws):
    place_order(outbox_db, 1, commit=False)
    connection = outbox_db.connect()
    add(connection.cursor(), receipt(2))
    connection.close()  # never committed: add itself commits nothing
    assert outbox_db.rows() == []


def test_an_invalid_job_raises_before_anything_is_written(outbox_db, aws):
    connection = outbox_db.connect()
    try:
        with pytest.raises(InvalidJob, match="group_id must be 1 to 128"):
            add(connection.cursor(), receipt(1), group_id="g" * 129)
        with pytest.raises(ValueError, match="plain SQL identifier"):
            add(connection.cursor(), receipt(1), table="outbox--")
        connection.commit()
    finally:
        connection.close()
    assert outbox_db.rows() == []


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_the_relay_command_sends_what_enqueue_would_and_marks_it_relayed(outbox_db, aws, fifo):
    url = queue(fifo=fifo)
    for n in range(12):
        place_order(outbox_db, n)
    place_order(outbox_db, "rolled-back", commit=False)
    done = relay_command(outbox_db, url, "--once", env={**os.environ})
    assert done.returncode == 0, done.stderr
    batches = [line for line in lines(done.stdout) if line["event"] == "batch"]
    assert sum(line["relayed"] for line in batches) == 12 and all(line["lag_ms"] >= 0 for line in batches)
    messages = received(url, expect=12)
    by_key = {json.loads(m["Body"])["dedupeKey"]: m for m in messages}
    assert sorted(by_key) == sorted(f"order-{n}:receipt" for n in range(12))
    for n in range(12):
        job, message = receipt(n), by_key[f"order-{n}:receipt"]
        expected = message_request(job, url)
        assert message["Body"] == expected["MessageBody"]
        if fifo:
            assert message["Attributes"]["MessageGroupId"] == expected["MessageGroupId"] == f"c{n}@example.org"
            assert len(message["Attributes"]["MessageDeduplicationId"]) == 64  # the row names its sending
    assert {row["state"] for row in outbox_db.rows()} == {"relayed"}


def test_a_refused_or_unparseable_row_is_marked_failed_with_its_reason_and_blocks_nothing_behind_it(outbox_db, aws):
    url = queue(MaximumMessageSize="262144")
    place_order(outbox_db, 1)
    place_order(outbox_db, "huge", text="x" * 300_000)  # valid for the contract, too large for the queue
    outbox_db.execute("INSERT INTO sendonce_outbox (dedupe_key, job, created_at_ms) VALUES (%s, %s, %s)",
                      ("written-by-hand", '{"dedupeKey": "written-by-hand"}', 0))
    place_order(outbox_db, 2)
    log: list[dict[str, Any]] = []
    relay = OutboxRelay(database(outbox_db.dsn), RelaySettings(url), log=log.append)
    try:
        relay.drain()
    finally:
        relay.close()
    states = {row["dedupe_key"]: (row["state"], row["failure"] or "") for row in outbox_db.rows()}
    assert states["order-1:receipt"] == states["order-2:receipt"] == ("relayed", "")
    assert states["order-huge:receipt"][0] == "failed" and "SQS refused it" in states["order-huge:receipt"][1]
    assert states["written-by-hand"][0] == "failed" and "not a job the contract parses" in states["written-by-hand"][1]
    assert sorted(json.loads(m["Body"])["dedupeKey"] for m in received(url, expect=2)) == [
        "order-1:receipt", "order-2:receipt"]
    assert sum(line.get("refused", 0) for line in log) == 2
    assert len([line for line in log if line["event"] == "refused"]) == 2


class Throttled:
    """The emulator's SQS, throttling the relay's first ``times`` batches (as SQS does under a burst)."""

    def __init__(self, times: int) -> None:
        self.sqs, self.times, self.calls = boto3.client("sqs"), times, 0

    def send_message_batch(self, **request: Any) -> Any:
        self.calls += 1
        if self.calls <= self.times:
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessageBatch")
        return self.sqs.send_message_batch(**request)


def test_sqs_throttling_keeps_the_rows_pending_and_backs_off_until_they_go(outbox_db, aws):
    url = queue()
    for n in range(3):
        place_order(outbox_db, n)
    log: list[dict[str, Any]] = []
    relay = OutboxRelay(database(outbox_db.dsn), RelaySettings(url), sqs=Throttled(2), log=log.append)
    try:
        first = relay.relay_batch()
        assert (first.kept, first.relayed) == (3, 0) and "ThrottlingException" in first.kept_reason
        assert {row["state"] for row in outbox_db.rows()} == {"pending"}
        assert relay.backoff_s() > 0
        relay.drain()
    finally:
        relay.close()
    assert {row["state"] for row in outbox_db.rows()} == {"relayed"}
    assert all(row["attempts"] == 3 for row in outbox_db.rows())  # two batches kept back, the third relayed
    assert len(received(url, expect=3)) == 3


class Holding:
    """The emulator's SQS; the first batch is held until ``release`` is set, so a second relay runs meanwhile."""

    def __init__(self) -> None:
        self.sqs, self.holding, self.release = boto3.client("sqs"), threading.Event(), threading.Event()

    def send_message_batch(self, **request: Any) -> Any:
        if not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(30)
        return self.sqs.send_message_batch(**request)


@pytest.mark.parametrize("outbox_db", ["postgresql", "mysql", "sqlite"], indirect=True)
def test_two_relays_never_hold_the_same_row(outbox_db, aws):
    """The first relay holds one batch in its send and may have claimed the next behind it (not on SQLite): of 12
    rows, at least 4 are free for the second relay at once, and no row is ever sent by both."""
    url = queue()
    for n in range(12):
        place_order(outbox_db, n)
    held, first_log, second_log = Holding(), [], []
    first = OutboxRelay(database(outbox_db.dsn), RelaySettings(url, batch_size=4), sqs=held, log=first_log.append)
    second = OutboxRelay(database(outbox_db.dsn), RelaySettings(url, batch_size=4), log=second_log.append)
    worker = threading.Thread(target=first.relay_batch)
    worker.start()
    try:
        assert held.holding.wait(10)
        if outbox_db.dialect == "sqlite":  # one writer: the second relay waits for the first's transaction
            waiting = threading.Thread(target=second.relay_batch)
            waiting.start()
            waiting.join(0.5)
            assert waiting.is_alive()
            held.release.set()
            waiting.join(30)
        else:  # SKIP LOCKED: the second relay takes the rows behind the held ones, at once
            assert second.relay_batch().relayed == 4
            held.release.set()
        worker.join(30)
    finally:
        held.release.set()
        first.close()  # a batch it claimed ahead goes back, unsent
        second.close()
    assert first_log[0]["relayed"] == second_log[0]["relayed"] == 4
    rest = OutboxRelay(database(outbox_db.dsn), RelaySettings(url), log=lambda line: None)
    try:
        rest.drain()
    finally:
        rest.close()
    messages = received(url, expect=12)
    assert sorted(json.loads(m["Body"])["dedupeKey"] for m in messages) == sorted(
        f"order-{n}:receipt" for n in range(12))  # each once: no row was held, and sent, by two relays


@pytest.mark.parametrize("outbox_db", ["postgresql"], indirect=True)  # LISTEN/NOTIFY: the others poll
def test_notify_wakes_the_relay_at_once_long_before_its_poll(outbox_db, aws):
    url = queue()
    relay = OutboxRelay(database(outbox_db.dsn), RelaySettings(url, poll_interval_s=60), log=lambda line: None)
    stop = threading.Event()
    worker = threading.Thread(target=relay.run, args=(stop,))
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while relay._listener is None and time.monotonic() < deadline:  # listening before the commit
            time.sleep(0.01)
        committed = time.monotonic()
        place_order(outbox_db, 1)
        assert len(received(url, bound_s=10, expect=1)) == 1
        assert time.monotonic() - committed < 5  # a poll would have taken 60 s
    finally:
        stop.set()
        worker.join(10)
        relay.close()


@pytest.mark.parametrize("outbox_db", ["postgresql", "sqlite"], indirect=True)  # the signals are the relay's
def test_sigterm_finishes_the_batch_in_hand_and_exits_0_and_sigkill_loses_nothing(outbox_db, aws):
    url = queue()
    for n in range(200):
        place_order(outbox_db, n)
    env = {**os.environ}
    killed = subprocess.Popen([*RELAY, "--dsn", outbox_db.dsn, "--queue-url", url],  # the default batch
                              stdout=subprocess.PIPE, text=True, env=env)
    assert killed.stdout is not None
    seen = [json.loads(killed.stdout.readline()) for _ in range(4)]  # started, then three batches
    killed.send_signal(signal.SIGKILL)
    killed.wait(10)
    assert seen[0]["event"] == "started" and seen[-1]["event"] == "batch"
    stopped = subprocess.Popen([*RELAY, "--dsn", outbox_db.dsn, "--queue-url", url],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert stopped.stdout is not None
    assert json.loads(stopped.stdout.readline())["event"] == "started"
    first_batch = stopped.stdout.readline()
    assert json.loads(first_batch)["event"] == "batch"
    stopped.send_signal(signal.SIGTERM)
    out, err = stopped.communicate(timeout=30)
    assert stopped.returncode == 0, err
    after = lines(first_batch + out)
    assert after[-1]["event"] == "stopped"  # every batch it began was marked and committed
    assert after[-1]["relayed"] == sum(line["relayed"] for line in after if line["event"] == "batch") > 0
    done = relay_command(outbox_db, url, "--once", env=env)
    assert done.returncode == 0, done.stderr
    keys = [json.loads(m["Body"])["dedupeKey"] for m in received(url, expect=200)]
    assert set(keys) == {f"order-{n}:receipt" for n in range(200)}
    assert len(keys) - 200 <= 10  # the kill re-sent at most the one SendMessageBatch its transaction held
    assert {row["state"] for row in outbox_db.rows()} == {"relayed"}


def test_retention_deletes_old_relayed_rows_in_small_batches_and_keeps_the_rest(outbox_db, aws):
    url = queue()
    for n in range(5):
        place_order(outbox_db, n)
    relay = OutboxRelay(database(outbox_db.dsn), RelaySettings(url, retention_s=7 * 86_400), log=lambda line: None)
    try:
        relay.drain()
        old_ms = int((time.time() - 8 * 86_400) * 1000)
        outbox_db.execute("UPDATE sendonce_outbox SET relayed_at_ms = %s WHERE dedupe_key IN (%s, %s)",
                          (old_ms, "order-0:receipt", "order-1:receipt"))
        place_order(outbox_db, 9)  # pending: never deleted
        assert relay.retain() == 2
    finally:
        relay.close()
    assert sorted(row["dedupe_key"] for row in outbox_db.rows()) == [
        "order-2:receipt", "order-3:receipt", "order-4:receipt", "order-9:receipt"]


@pytest.mark.parametrize("outbox_db", ["postgresql"], indirect=True)
def test_a_bad_dsn_an_unreachable_database_or_a_missing_table_is_one_error_line_and_exit_2(outbox_db, tmp_path):
    url = "http://localhost:1/000000000000/jobs"
    cases = {
        "ftp://db/x": "the scheme must be postgresql://, mysql:// or sqlite:///path",
        "postgresql://postgres:secret@127.0.0.1:1/x": "cannot reach the database postgresql://postgres:***@",
        f"sqlite:///{tmp_path}/none.db": "there is no database file",
        outbox_db.dsn: "",
    }
    outbox_db.execute("DROP TABLE sendonce_outbox")
    for dsn, expected in cases.items():
        done = subprocess.run([*RELAY, "--dsn", dsn, "--queue-url", url, "--once"], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 2, (dsn, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("sendonce-outbox-relay: error: ")
        assert expected in line if expected else "sendonce-outbox-relay --schema postgresql" in line
        assert "secret" not in line


def test_the_demo_phase_fails_when_a_committed_orders_email_is_missing_or_doubled_or_a_rolled_back_one_is_sent():
    from sendonce_local.demo.phases.sql_outbox import SqlOutboxReport

    def phase(**changes: Any) -> SqlOutboxReport:
        fields = {"orders": 12, "committed": 10, "rolled_back": 2, "applied_twice": 3, "relay_killed_after_batches": 2,
                  "relay_stopped_cleanly": True, "consumers_killed": 2, "emails_per_committed_key": {1: 10},
                  "rolled_back_emailed": 0, "drain_s": 1.0}
        return SqlOutboxReport(**{**fields, **changes})

    assert phase().ok and phase().lines()[-1].endswith("PASS")
    assert not phase(emails_per_committed_key={1: 9, 0: 1}).ok  # missing
    assert not phase(emails_per_committed_key={1: 9, 2: 1}).ok  # doubled
    assert not phase(rolled_back_emailed=1).ok
    assert phase(rolled_back_emailed=1).lines()[-1].endswith("FAIL")


def test_a_queue_url_naming_no_queue_or_a_bad_option_is_one_error_line_and_exit_2_and_the_rows_stay(outbox_db, aws):
    place_order(outbox_db, 1)
    missing = queue().rsplit("/", 1)[0] + "/no-such-queue"
    done = relay_command(outbox_db, missing, "--once", env={**os.environ})
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("sendonce-outbox-relay: error: SQS has no queue at ") and "queue.queue_url" in line
    assert [row["state"] for row in outbox_db.rows()] == ["pending"]
    # Each refused before anything runs: the retention case names a queue that exists, so only its own rule stops it.
    for args, said in ((["--schema", "sqlite", "--table", "x; drop"], "plain SQL identifier"),
                       (["--schema", "oracle"], "--schema"),
                       (["--dsn", outbox_db.dsn, "--queue-url", queue(), "--retention-days", "0"], "retention")):
        done = subprocess.run([*RELAY, *args], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ})
        assert done.returncode == 2, (args, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("sendonce-outbox-relay: error: ") and said in line, (args, line)
    assert [row["state"] for row in outbox_db.rows()] == ["pending"]


def test_add_takes_the_json_job_as_a_dict_checked_as_the_consumer_parses_it_and_refuses_anything_else(outbox_db, aws):
    document = receipt(1).to_document()
    connection = outbox_db.connect()
    try:
        cursor = connection.cursor()
        assert add(cursor, document) is True
        assert add(cursor, receipt(1)) is False  # the same key, as an EmailJob: already there
        with pytest.raises(InvalidJob, match="'order-2:receipt'"):
            add(cursor, {**receipt(2).to_document(), "to": ["not an address"]})
        for wrong in (receipt(3).to_message(), [document], None):
            with pytest.raises(TypeError, match="an EmailJob or the JSON job as a mapping"):
                add(cursor, wrong)
        connection.commit()
    finally:
        connection.close()
    assert [row["dedupe_key"] for row in outbox_db.rows()] == ["order-1:receipt"]
    url = queue()
    assert relay_command(outbox_db, url, "--once").returncode == 0
    [message] = received(url, expect=1)
    assert message["Body"] == receipt(1).to_message()  # what the relay sends is what enqueue would


@pytest.mark.parametrize("outbox_db", ["mysql"], indirect=True)
def test_on_mysql_only_the_duplicate_key_is_absorbed_under_either_row_count_flag(outbox_db, aws):
    import pymysql
    from pymysql.constants import CLIENT

    outbox_db.execute("CREATE TABLE narrow_outbox LIKE sendonce_outbox")
    outbox_db.execute("ALTER TABLE narrow_outbox MODIFY job VARCHAR(16) NOT NULL")
    try:
        for flags in (0, CLIENT.FOUND_ROWS):
            connection = database(outbox_db.dsn).connect()
            own = pymysql.connect(host=connection.host, port=connection.port, user=connection.user,
                                  password=connection.password, database=connection.db, client_flag=flags)
            connection.close()
            try:
                cursor = own.cursor()
                assert add(cursor, receipt(f"flags{flags}")) is True
                assert add(cursor, receipt(f"flags{flags}")) is False
                with pytest.raises(pymysql.err.DataError, match="too long"):  # INSERT IGNORE wrote a cut job
                    add(cursor, receipt(f"narrow{flags}"), table="narrow_outbox")
                own.commit()
            finally:
                own.close()
        assert [row["dedupe_key"] for row in outbox_db.rows()] == ["order-flags0:receipt", "order-flags2:receipt"]
        assert outbox_db.rows("narrow_outbox") == []
    finally:
        outbox_db.execute("DROP TABLE narrow_outbox")


class RelayKilled(BaseException):
    """The relay's process dying: nothing of the relay catches it, and its connection is dropped uncommitted."""


class KilledAt:
    """The emulator's SQS and the relay's database, with a kill at one point of the ``batch``-th transaction:
    before its send, after SQS accepted it (the answer never read), or at its commit (the marks never committed)."""

    def __init__(self, db: Any, point: str, batch: int) -> None:
        self.sqs, self.db, self.point, self.batch, self.sends = boto3.client("sqs"), database(db.dsn), point, batch, 0
        self.dialect, self.errors, self.shown, self.listen = self.db.dialect, self.db.errors, self.db.shown, None

    def send_message_batch(self, **request: Any) -> Any:
        self.sends += 1
        if self.sends == self.batch and self.point == "before the send":
            raise RelayKilled
        answer = self.sqs.send_message_batch(**request)
        if self.sends == self.batch and self.point == "after SQS accepted":
            raise RelayKilled
        return answer

    def connect(self) -> Any:
        connection, killer = self.db.connect(), self

        class Dying:
            def __getattr__(self, name: str) -> Any:
                return getattr(connection, name)

            def commit(self) -> None:
                if killer.sends == killer.batch and killer.point == "at the commit":
                    raise RelayKilled
                connection.commit()

        return Dying()


@pytest.mark.parametrize("point", ["before the send", "after SQS accepted", "at the commit"])
def test_a_relay_killed_at_any_point_of_a_batch_re_sends_at_most_one_send_message_batch(outbox_db, aws, point):
    url = queue()
    for n in range(35):
        place_order(outbox_db, n)
    for batch in (1, 3):  # the first transaction, and one after others committed
        killed = KilledAt(outbox_db, point, batch)
        relay = OutboxRelay(killed, RelaySettings(url), sqs=killed, log=lambda line: None)  # type: ignore[arg-type]
        with pytest.raises(RelayKilled):
            relay.drain()
        relay._drop_connection()  # the process is gone: the server rolls its transaction back
        relay.close()
    survivor = OutboxRelay(database(outbox_db.dsn), RelaySettings(url), log=lambda line: None)
    try:
        survivor.drain()
    finally:
        survivor.close()
    keys = [json.loads(m["Body"])["dedupeKey"] for m in received(url, expect=35)]
    assert set(keys) == {f"order-{n}:receipt" for n in range(35)}  # nothing lost
    # Two kills, each re-sending exactly the one SendMessageBatch (ten jobs) it had sent and not marked, if any.
    assert len(keys) - len(set(keys)) == {"before the send": 0, "after SQS accepted": 20, "at the commit": 20}[point]
    assert {row["state"] for row in outbox_db.rows()} == {"relayed"}
