"""Any interleaving of transactions that commit or roll back, duplicate adds, and two relays killed at random points:
every committed key reaches the queue at least once, no rolled-back key ever does, and after the consumer each
committed key is sent exactly once (counted in the emulator's SES). Against the real PostgreSQL and SQS over HTTP."""

from __future__ import annotations

import json
import uuid
from typing import Any

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_producer import EmailJob
from sendonce_producer.sql_connect import database
from sendonce_producer.sql_outbox import add
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings

pytestmark = pytest.mark.slow
KEYS = 4
KILL_POINTS = [None, "after_claim", "after_send"]  # where a relay dies: before SQS saw the batch, or after it took it


class Killed(BaseException):
    """The relay's process died (SIGKILL): nothing after this point of the batch runs."""


class DyingSqs:
    """The emulator's SQS; the relay dies before its next send (after_claim) or right after SQS took it."""

    def __init__(self, kill: str | None) -> None:
        self.sqs, self.kill = boto3.client("sqs"), kill

    def send_message_batch(self, **request: Any) -> Any:
        if self.kill == "after_claim":
            raise Killed
        response = self.sqs.send_message_batch(**request)
        if self.kill == "after_send":
            raise Killed
        return response


# A step: a transaction (key, commits, adds its key twice, a relay batch runs while it is open), or a relay batch
# (which of the two relays, where it dies).
transaction = st.tuples(st.just("tx"), st.integers(0, KEYS - 1), st.booleans(), st.booleans(), st.booleans())
relay_step = st.tuples(st.just("relay"), st.integers(0, 1), st.sampled_from(KILL_POINTS))
plans = st.lists(st.one_of(transaction, relay_step), min_size=1, max_size=10)


def job(key: str) -> EmailJob:
    return EmailJob(dedupe_key=key, sender="Shop <receipts@example.com>", to=["ada@example.org"],
                    subject=f"Receipt {key}", text="Thanks for your order.")


class World:
    def __init__(self, db: Any, url: str) -> None:
        self.db, self.url = db, url
        self.relays: list[OutboxRelay | None] = [None, None]

    def relay_batch(self, index: int, kill: str | None) -> None:
        relay = self.relays[index] or OutboxRelay(database(self.db.dsn), RelaySettings(self.url, batch_size=3),
                                                  log=lambda line: None)
        self.relays[index] = relay
        relay.sqs = DyingSqs(kill)
        try:
            relay.relay_batch()
        except Killed:  # the process is gone: its connection closes and the server rolls its transaction back
            relay._drop_connection()
            relay.close()
            self.relays[index] = None

    def close(self) -> None:
        for relay in self.relays:
            if relay is not None:
                relay.close()


def play(db: Any, url: str, prefix: str, plan: list[tuple[Any, ...]]) -> tuple[set[str], set[str]]:
    world, committed, rolled_back = World(db, url), set(), set()
    try:
        for step in plan:
            if step[0] == "relay":
                world.relay_batch(step[1], step[2])
                continue
            _, index, commits, twice, relay_meanwhile = step
            key = f"{prefix}:{index}"
            connection = db.connect()
            try:  # closed whatever happens: an open transaction would hold the next example's table reset
                cursor = connection.cursor()
                cursor.execute("INSERT INTO orders (id, customer) VALUES (%s, %s)", (uuid.uuid4().hex, key))
                for _ in range(2 if twice else 1):
                    add(cursor, job(key))
                if relay_meanwhile:  # an open transaction's row is invisible to the relay
                    world.relay_batch(0, None)
                connection.commit() if commits else connection.rollback()
            finally:
                connection.close()
            (committed if commits else rolled_back).add(key)
        final = OutboxRelay(database(db.dsn), RelaySettings(url), log=lambda line: None)
        final.drain()
        final.close()
    finally:
        world.close()
    return committed, rolled_back - committed


def queued(url: str) -> list[str]:
    sqs, bodies = boto3.client("sqs"), []
    while True:
        batch = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get("Messages", [])
        if not batch:
            return bodies
        bodies += [message["Body"] for message in batch]


@pytest.mark.parametrize("outbox_db", ["postgresql"], indirect=True)
def test_committed_keys_reach_the_queue_rolled_back_ones_never_and_each_is_sent_once(outbox_db, pipeline):
    @settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(plan=plans)
    def check(plan):
        outbox_db.reset()
        prefix = uuid.uuid4().hex[:8]
        url = boto3.client("sqs").create_queue(QueueName=f"jobs-{prefix}")["QueueUrl"]
        committed, rolled_back = play(outbox_db, url, prefix, plan)
        bodies = queued(url)
        keys = {json.loads(body)["dedupeKey"] for body in bodies}
        assert committed <= keys, "a committed key never reached the queue"
        assert not keys & rolled_back, "a rolled-back key reached the queue"
        clock = FakeClock()
        for body in bodies:  # every copy, as SQS would hand them to the consumer
            pipeline.consumer(clock).handle(event(sqs_record(body)), FakeContext(clock))
        sent = pipeline.emails_per_key()
        assert {key: sent[key] for key in committed} == dict.fromkeys(committed, 1)
        assert not any(sent[key] for key in rolled_back)

    check()
