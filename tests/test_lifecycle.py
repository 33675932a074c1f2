"""A key's whole lifecycle as a stateful property test (issue 55): a hypothesis ``RuleBasedStateMachine`` drives the
real consumer, recorder, producer (``enqueue``, ``enqueue_many``, ``cancel``, both outboxes' relays) and operator
commands (``sendonce resolve``, ``sendonce dlq redrive``, ``sendonce doubles``) against the emulator, on a fake clock.

Each example deploys a pipeline as the construct would with a 30 s function (visibility timeout 180 s),
``max_receive_count`` 5, SES's events with the default 5-minute grace period, a 2-hour queue retention and a 3-hour
``dedupe_ttl`` (short, so a run can jump past them; synth allows both) and a 4 KiB ``max_message_size_bytes``, on a
standard or a FIFO queue, under either delivery policy, a batch's records in turn or ten at once. The job queue is
the emulator's real SQS queue, its time played on the fake clock (``lifecycle_harness.JobQueue``); Lambda's event
source hands due messages to ``Consumer.handle`` and deletes all but the batch item failures; SES's events reach the
real recorder as the weather says. Emails are counted in the emulator's SES.

Rules: enqueue a key (the producer's ``enqueue``, ``enqueue_many``, the DynamoDB outbox's relay, the SQL outbox's
relay), now or with a ``sendAt`` up to the pipeline's horizon, at the largest size the producer takes or not; enqueue
it again after its ``dedupe_ttl``; cancel it (``cancel`` or ``sendonce cancel``); time passing with the pipeline
running (past leases, the grace period, retention, ``dedupe_ttl``), Lambda's event source keeping up or minutes
behind (a backlog); SES throttling, answering 5xx, accepting and losing its answer, refusing past its daily quota;
SES's account stopped and resumed; the next invocation (or five) killed after any of its AWS calls (or before the
first), losing the answer of any call after it took effect, losing a request before it did, meeting a slow answer
(killed when that passes its deadline), or throttled by DynamoDB; SES's events in time, twice, out of order, late
(past the grace period), past the key's lifetime, their Send lost or all lost; a new Lambda instance; an operator
deciding what ``sendonce unknown`` lists (``resolve --sent`` when SES sent it, else ``--resend`` and the job enqueued
again) and running ``sendonce dlq redrive``.

Invariants, after every step: no email after a cancel that answered cancelled (but for a job enqueued after its
tombstone expired); at most one SES acceptance per key per lifetime of its ledger record, never two under
never-resend, and under resend-without-evidence a second one only after a crash, a lost answer or an ambiguous send of
that key, reported by both the recorder's ``DoubleSends`` and ``sendonce doubles`` as soon as the ledger knows both
SES message ids; ``UNKNOWN`` only under never-resend after such a crash; every dead letter with a reason the
guarantees allow for what happened (``max-receives``, or SQS's own move, only when the message's receives went on
what spends one: kills, ambiguous sends, waits for SES's events, real failures, and on a FIFO queue the waits it
documents as spending one, for a lease or a stop of SES's; ``ses-paused`` only for a job parked as long as the queue
keeps a message; never for what the guarantees say is never dead-lettered: SES's or DynamoDB's throttling, a
``sendAt``, a lost copy).
At the end (the faults stopped, SES sending, the pipeline run until its queue drains, an operator deciding the
``UNKNOWN`` keys): the queue is empty, and every job ended sent, cancelled, or in the DLQ with such a reason.

Replay: every failure names its seed and prints the one command that reruns its run, ``SENDONCE_LIFECYCLE_SEED=<seed>
.venv/bin/python -m pytest '<the failing test's id>'`` (``SENDONCE_EXAMPLES`` too when it was set): the same draws,
the same failure, which the rerun shrinks to its fewest steps (``make test`` reports a failure as found, unshrunk:
shrinking replays the world hundreds of times). Hypothesis prints the steps; the failure says what happened in the
world, invocation by invocation. Without the variable each run draws a new seed. With ten records at once
(``parallelism=10``) which call a kill meets can differ between runs. ``make test`` draws 24 examples (six of each
parameter set); ``make test-soak`` (``SENDONCE_EXAMPLES=8``) eight times as many. ``SENDONCE_LIFECYCLE_JOURNAL=1``
prints what happened in every example.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import itertools
import json
import os
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.config import Config
from consumer_harness import (
    CONFIGURATION_SET,
    EMULATOR_READ_TIMEOUT_S,
    PIPELINE_TAG,
    SENDER_DOMAIN,
    FakeClock,
    FakeContext,
    event,
    failed_ids,
)
from crash_injection import WorkerKilled
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from lifecycle_harness import (
    CallFaults,
    Email,
    Gone,
    InvocationFaults,
    JobQueue,
    QueuedMessage,
    SesEvents,
    Weather,
    modules_on_clock,
)
from property_budget import examples
from ses_fault_proxy import Fault, SesFaultProxy

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import TimeBudget
from sendonce_contract.priority import Priority
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import DEDUPE_KEY, DeadLetter, Ledger, OutboxItem, ReasonCode
from sendonce_contract.sqs_limits import message_bytes
from sendonce_contract.waiting_room import (
    DUE,
    RELEASE_AHEAD_S,
    ROOM,
    STOPS,
    WATCH_EVERY_S,
    ScheduleWatchConfig,
    due_ms_of,
    room_of,
)
from sendonce_local.emulator.slow_services import Rule
from sendonce_ops.cli import main as sendonce
from sendonce_producer import EmailJob, JobTooLarge, cancel, enqueue, enqueue_many, outbox_put, sql_outbox
from sendonce_producer.enqueue import message_request
from sendonce_producer.sql_connect import database
from sendonce_producer.sql_dialects import schema_statements
from sendonce_producer.sql_relay import OutboxRelay, RelaySettings
from sendonce_runtime.aws_clients import ledger_config, ses_config
from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings
from sendonce_runtime.handler import Consumer
from sendonce_runtime.outbox_relay import relay as relay_stream_records
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.redelivery import FIFO_RECEIVES_KEPT_FOR_FAILURES, parked_margin_s
from sendonce_runtime.schedule_watch import ScheduleWatch
from sendonce_runtime.settings import Settings

RESEND, NEVER = DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, DeliveryPolicy.NEVER_RESEND
REPLAYING = bool(os.environ.get("SENDONCE_LIFECYCLE_SEED"))
SEED = int(os.environ.get("SENDONCE_LIFECYCLE_SEED") or random.SystemRandom().randrange(2**32))
_SCALE = os.environ.get("SENDONCE_EXAMPLES")  # the examples' count, which the draws depend on


def rerun(test_id: str) -> str:
    """The command that reruns this run of the test ``test_id`` (its pytest node id): its seed, the examples' scale,
    the test with its parameters."""
    return " ".join([f"SENDONCE_LIFECYCLE_SEED={SEED}", *([f"SENDONCE_EXAMPLES={_SCALE}"] if _SCALE else []),
                     f".venv/bin/python -m pytest '{test_id}'",
                     *([] if REPLAYING else ["(shrinks the failure to its fewest steps)"])])


# The pipeline, as the construct deploys it with these props.
FUNCTION_TIMEOUT_MS = 30_000
TIME_BUDGET = TimeBudget.for_function_timeout(FUNCTION_TIMEOUT_MS / 1000)
VISIBILITY_TIMEOUT_S = 180  # 6 x the function timeout: the construct's default and its minimum
MAX_RECEIVE_COUNT = 5
GRACE_MS = 300_000  # evidence_grace_period's default
RETENTION_S = 2 * 3_600  # retention_period: at least 2 x the visibility timeout + the grace period
DEDUPE_TTL_S = 3 * 3_600  # dedupe_ttl: at least retention_period; also the furthest sendAt
MAX_MESSAGE_BYTES = 4_096  # max_message_size_bytes: small, so a job at the limit is small too
BATCH_SIZE = 10
LEASE_MS = FUNCTION_TIMEOUT_MS + TIME_BUDGET.lease_margin_ms  # a claim's lease, at most

KEY_NAMES = ("a", "b", "c")
# Each key's recipient: on a FIFO queue, keys a and c share a message group (the first recipient) and b has its own.
RECIPIENTS = {"a": "ada@example.org", "b": "bob@example.org", "c": "ada@example.org"}
# How much the pipeline may do in one step (each invocation is real calls to the emulator); the rest waits.
INVOCATIONS_PER_STEP = 25
# The end of a run: the pipeline runs until its queue drains, at most this long and this many invocations.
DRAIN_MS = DEDUPE_TTL_S * 1000 + 3_600_000
DRAIN_INVOCATIONS = 150

SPANS_MS = {"a second": 1_000, "ten seconds": 10_000, "a minute": 60_000,
            "past a lease and the grace period": LEASE_MS + GRACE_MS + 5_000, "20 minutes": 1_200_000,
            "past retention": RETENTION_S * 1000 + 60_000, "past dedupe_ttl": DEDUPE_TTL_S * 1000 + 60_000}
BACKLOGS_MS = {"keeping up": 0, "two minutes behind": 120_000, "20 minutes behind": 1_200_000}
SEND_AT_MS = {"now": None, "in 30 seconds": 30_000, "in 20 minutes": 1_200_000,
              "at the horizon (dedupe_ttl ahead)": DEDUPE_TTL_S * 1000}
ENQUEUE_PATHS = ("enqueue", "enqueue_many", "DynamoDB outbox", "SQL outbox")
LATE_MS = LEASE_MS + GRACE_MS + 120_000  # past a dead worker's lease and its grace period
PAST_LIFETIME_MS = DEDUPE_TTL_S * 1000 + 600_000
WEATHERS = {w.name: w for w in (
    Weather("in time", (1_000,), (3_000,)),
    Weather("twice", (1_000, 2_000), (3_000, 4_000)),
    Weather("out of order", (2_000,), (1_000,)),
    Weather("late", (LATE_MS,), (LATE_MS + 2_000,)),
    Weather("past the key's lifetime", (PAST_LIFETIME_MS,), (PAST_LIFETIME_MS + 2_000,)),
    Weather("Send lost", (), (3_000,)),
    Weather("lost", (), ()),
)}
SES_FAULTS = (Fault.THROTTLE, Fault.SERVER_ERROR, Fault.ACCEPT_THEN_DROP, Fault.ACCEPT_THEN_SERVER_ERROR,
              Fault.QUOTA)
SES_FAULTS_THAT_MAY_HAVE_SENT = frozenset({Fault.SERVER_ERROR, Fault.ACCEPT_THEN_DROP, Fault.ACCEPT_THEN_SERVER_ERROR})
THROTTLED_OPERATIONS = {"DynamoDB throttles every call": None, "DynamoDB throttles the claim (PutItem)": "PutItem",
                        "DynamoDB throttles UpdateItem (completion, takeover)": "UpdateItem",
                        "DynamoDB throttles DeleteItem (release)": "DeleteItem"}
# How the next invocation goes wrong: the InvocationFaults field its call number arms, and how late a slow answer is.
GOES_WRONG: dict[str, tuple[str, int]] = {
    "killed after call": ("kill_after_call", 0), "answer of call lost": ("lose_answer_of_call", 0),
    "request of call lost": ("lose_request_of_call", 0), "call answers 5 s late": ("slow_call", 5_000),
    "call answers 20 s late": ("slow_call", 20_000),
    "call answers 45 s late (past the deadline)": ("slow_call", 45_000),
    **{how: ("", 0) for how in THROTTLED_OPERATIONS}}

# What a receive may be spent on, by the guarantees: a dead invocation, a send that may have left, a wait for SES's
# events, a failure that is not a wait. On a FIFO queue a wait is the message's own visibility, and those the
# guarantees document as spending a receive there count too (a lease's, a stop of SES's, a turn at the rate); never
# SES's or DynamoDB's throttling, which they say is never dead-lettered.
SPENDS_A_RECEIVE = frozenset({"killed", "ambiguous", "awaiting_evidence", "deadline", "ledger_failed",
                              "internal_error", "contended", "dead_letter_failed", "group_blocked",
                              "attachment_read_failed"})
FIFO_SPENDS_A_RECEIVE = SPENDS_A_RECEIVE | {"in_flight_elsewhere", "ses_stopped", "quota_exhausted", "paced"}
# What a FIFO job waits out (by its visibility, or at its group's back once it keeps only the receives it keeps for
# failures): none of these on its last receives lets SQS move it to the DLQ.
FIFO_WAITS = frozenset({"throttled", "in_flight_elsewhere", "ses_stopped", "quota_exhausted", "paced", "ambiguous",
                        "awaiting_evidence"})
PARKED = frozenset({"ses_stopped", "quota_exhausted"})
MAY_HAVE_SENT = frozenset({"ambiguous", "sent_unrecorded"})


@dataclass
class Job:
    """One job the producer put in the queue (or in an outbox that relayed it)."""

    key: str
    order: int
    enqueued_ms: int
    path: str
    already_sent: bool  # its key's live record held a send when it was enqueued: a duplicate of it
    left_for_a_person: bool  # its key's live record was UNKNOWN when it was enqueued (a duplicate of that)


@dataclass
class Cancel:
    key: str
    order: int
    cancelled: bool
    stands_until_ms: int  # its tombstone's expiry (0 when it was too late)


@dataclass
class Lifetime:
    """A key's emails between its ledger record's creation and its expiry (or deletion)."""

    emails: list[Email] = field(default_factory=list)


@dataclass
class Story:
    """What happened in one run, in order (each happening numbered), and what the invariants hold it to."""

    keys: tuple[str, ...]
    jobs: list[Job] = field(default_factory=list)
    cancels: list[Cancel] = field(default_factory=list)
    lifetimes: dict[str, list[Lifetime]] = field(default_factory=dict)
    record_ended: dict[str, bool] = field(default_factory=dict)  # its record absent or expired when last looked at
    crashes: dict[str, list[int]] = field(default_factory=dict)  # when a send of it was left undecided
    parked: dict[str, list[int]] = field(default_factory=dict)  # when it was parked (fake ms)
    marked_unknown: dict[str, list[int]] = field(default_factory=dict)  # when a worker recorded it UNKNOWN
    journal: list[str] = field(default_factory=list)
    order: int = 0

    def __post_init__(self) -> None:
        for key in self.keys:
            self.lifetimes[key], self.record_ended[key], self.crashes[key] = [], True, []
            self.parked[key], self.marked_unknown[key] = [], []

    def next_order(self) -> int:
        self.order += 1
        return self.order


def job_for(key: str, name: str, queue_url: str, at_limit: bool = False, send_at_ms: int | None = None) -> EmailJob:
    """The key's job: the same content each time (a ``sendAt`` is not content). ``at_limit``: as large as the
    producer takes for the queue (its maximum message size, less the room the consumer's copies need)."""
    send_at = None if send_at_ms is None else datetime.fromtimestamp(send_at_ms / 1000, UTC)
    text = "Thanks for your order."
    made = EmailJob(dedupe_key=key, sender=f"Shop <receipts@{SENDER_DOMAIN}>", to=[RECIPIENTS[name]],
                    subject=f"Receipt {key}", text=text, send_at=send_at)
    if not at_limit:
        return made
    try:  # the producer says how large a job may be when it refuses one too large (before any call)
        enqueue(queue_url, dataclasses.replace(made, text="x" * MAX_MESSAGE_BYTES), sqs=object(),
                max_message_size_bytes=MAX_MESSAGE_BYTES)
        raise AssertionError("a job the size of the queue's limit was taken")
    except JobTooLarge as refused:
        room = refused.limit_bytes - message_bytes(message_request(made, queue_url))
    return dataclasses.replace(made, text=text + "x" * room)


def live(record: EmailRecord | None, now_ms: int) -> bool:
    """Whether a worker's claim would find ``record`` standing at ``now_ms``: the ledger's own condition (its
    ``expiresAt``, in seconds, not yet passed), which counts the whole second of the expiry as live."""
    return record is not None and (record.expires_at_s is None or record.expires_at_s >= now_ms // 1000)


def key_of_send(send: Any) -> str | None:
    subject = str(getattr(send, "subject", ""))
    return subject.removeprefix("Receipt ") if subject.startswith("Receipt ") else None


class Deployment:
    """What the examples of one test share: the emulator's tables, the clients (their hooks) and the fault proxies.
    Each example (:class:`World`) gets its own queues, keys and clock."""

    def __init__(self, aws: Any, slow: Any, ses_proxy: SesFaultProxy, tmp_path: Any, policy: DeliveryPolicy,
                 fifo: bool, test_id: str) -> None:
        self.aws, self.slow, self.ses_proxy, self.policy, self.fifo = aws, slow, ses_proxy, policy, fifo
        self.test_id = test_id
        # The examples' numbers, which name their keys and queues: counted per test (each has an emulator reset for
        # it), so a rerun of one test's parameters alone draws the same names.
        self.runs = itertools.count(1)
        self.sqs, self.dynamodb, self.ses = boto3.client("sqs"), boto3.client("dynamodb"), boto3.client("sesv2")
        self.table = "dedupe"
        for table, key in ((self.table, Ledger.KEY), ("outbox", OutboxItem.KEY)):
            self.dynamodb.create_table(
                TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
                **({"StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}}
                   if table == "outbox" else {}))
        self.evidence_dlq_url = self.sqs.create_queue(QueueName="evidence-dlq")["QueueUrl"]
        self.ses.create_email_identity(EmailIdentity=SENDER_DOMAIN)
        # The DynamoDB outbox: its table's stream is what the relay reads.
        self.streams = boto3.client("dynamodbstreams")
        stream_arn = self.dynamodb.describe_table(TableName="outbox")["Table"]["LatestStreamArn"]
        shard = self.streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self.stream_position = self.streams.get_shard_iterator(StreamArn=stream_arn, ShardId=shard,
                                                               ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        # The SQL outbox, in SQLite, and its relay (on the running example's clock).
        self.sql_path = tmp_path / "outbox.db"
        connection = sqlite3.connect(str(self.sql_path))
        for statement in schema_statements("sqlite"):
            connection.execute(statement)
        connection.commit()
        connection.close()
        self.clock: Any = FakeClock()
        # The queue's time and the invocations' faults, started afresh by each example.
        self.queue = JobQueue(self.sqs, fifo=fifo, visibility_timeout_s=VISIBILITY_TIMEOUT_S,
                              retention_s=RETENTION_S, max_message_bytes=MAX_MESSAGE_BYTES)
        self.call_faults = CallFaults()
        # The consumer's clients, as deployed (no SDK retry, its budget's timeouts, the emulator's read timeout):
        # DynamoDB behind the slow-services proxy (its throttling), SES behind the fault proxy, SQS on the fake
        # clock; each met by the invocation's faults.
        consumer_config = Settings(table_name=self.table, dead_letter_queue_url="", time_budget=TIME_BUDGET,
                                   parallelism=10)
        ledger = ledger_config(consumer_config).merge(Config(read_timeout=EMULATOR_READ_TIMEOUT_S))
        self.consumer_dynamodb = self.call_faults.watch(boto3.client("dynamodb", config=ledger,
                                                                     endpoint_url=slow.endpoint))
        self.consumer_ses = self.call_faults.watch(boto3.client("sesv2", config=ses_config(consumer_config),
                                                                endpoint_url=ses_proxy.endpoint))
        self.consumer_sqs = self.call_faults.watch(self.queue.watch(boto3.client("sqs", config=ledger), "consumer"))
        self.producer_sqs = self.queue.watch(boto3.client("sqs"), "producer")
        self.operator_sqs = self.queue.watch(boto3.client("sqs"), "operator")
        self.watch_sqs = self.queue.watch(boto3.client("sqs"), "schedule watch")
        self.sql_relay = OutboxRelay(database(f"sqlite:///{self.sql_path}"), RelaySettings(
            "https://sqs.us-east-1.amazonaws.com/123456789012/unused" + (".fifo" if fifo else ""),
            retention_s=3_600), sqs=self.producer_sqs, log=lambda line: None,
            clock=lambda: self.clock.now_ms() / 1000)

    def close(self) -> None:
        self.sql_relay.close()


class World:
    """One example: its queue and DLQ, keys, fake clock and consumer instances, and the story of what happened."""

    def __init__(self, deployment: Deployment, parallelism: int, seed: int, waiting_room: bool = False) -> None:
        d = self.d = deployment
        self.policy, self.fifo, self.parallelism, self.seed = d.policy, d.fifo, parallelism, seed
        self.run = next(d.runs)
        self.keys = {name: f"receipt:{self.run}:{name}" for name in KEY_NAMES}
        self.names = {key: name for name, key in self.keys.items()}
        self.story = Story(tuple(self.keys.values()))
        self.clock = FakeClock()
        self.start_ms = self.clock.now_ms()
        d.clock = self.clock
        d.ses_proxy.clear()
        d.slow.clear()
        d.ses.put_account_sending_attributes(SendingEnabled=True)
        suffix = ".fifo" if self.fifo else ""
        fifo = {"FifoQueue": "true"} if self.fifo else {}
        # The DLQ takes SQS's largest message, so any job can be dead-lettered with its reason (as the construct).
        self.dlq_url = d.sqs.create_queue(QueueName=f"jobs-dlq-{self.run}{suffix}", Attributes={
            **fifo, "MaximumMessageSize": "1048576", "MessageRetentionPeriod": "1209600"})["QueueUrl"]
        dlq_arn = d.sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"]
        self.queue_url = d.sqs.create_queue(QueueName=f"jobs-{self.run}{suffix}", Attributes={
            **fifo, "VisibilityTimeout": str(VISIBILITY_TIMEOUT_S), "MessageRetentionPeriod": str(RETENTION_S),
            "MaximumMessageSize": str(MAX_MESSAGE_BYTES),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVE_COUNT})})[
            "QueueUrl"]
        queue_arn = d.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"]
        self.queue = d.queue
        self.queue.start(self.queue_url, queue_arn, self.dlq_url, self.clock)
        self.dead_letters_judged = 0  # the queue's dead letters already held against the guarantees
        d.call_faults.start(self.clock)
        d.sql_relay.settings = dataclasses.replace(d.sql_relay.settings, queue_url=self.queue_url)
        self.pipeline_name = f"Test/Receipts{self.run}"  # its own SES stops on the shared table
        # With a waiting room, its own table, and the schedule watch EventBridge runs each minute (its SQS client
        # played on the fake clock, unfaulted, as the recorder's).
        room = f"room-{self.run}" if waiting_room else None
        self.watch: ScheduleWatch | None = None
        self.next_watch_ms = self.clock.now_ms()
        if room is not None:
            d.dynamodb.create_table(
                TableName=room, BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": ROOM, "KeyType": "HASH"}, {"AttributeName": DUE, "KeyType": "RANGE"}],
                AttributeDefinitions=[{"AttributeName": ROOM, "AttributeType": "S"},
                                      {"AttributeName": DUE, "AttributeType": "S"}])
            config = ScheduleWatchConfig(room, self.queue_url,
                                         ledger_table_name=d.table, sender_identity=SENDER_DOMAIN,
                                         configuration_set=CONFIGURATION_SET)
            self.watch = ScheduleWatch(config, d.dynamodb, d.watch_sqs, self.clock, io.StringIO(), ses=d.ses)
        self.room = room
        self.settings = Settings(
            table_name=d.table, dead_letter_queue_url=self.dlq_url, delivery=self.policy, dedupe_ttl_s=DEDUPE_TTL_S,
            parallelism=parallelism, fifo=self.fifo, configuration_set=CONFIGURATION_SET,
            pipeline_name=self.pipeline_name, time_budget=TIME_BUDGET, evidence_grace_ms=GRACE_MS,
            pipeline_tag=PIPELINE_TAG, queue_url=self.queue_url, max_receive_count=MAX_RECEIVE_COUNT,
            sender_identity=SENDER_DOMAIN, queue_retention_s=RETENTION_S, waiting_room_table=room)
        self.recorder_log = io.StringIO()
        recorder = EventRecorder.from_clients(
            RecorderSettings(d.table, d.evidence_dlq_url, PIPELINE_TAG, self.pipeline_name), d.dynamodb, d.sqs,
            self.clock, EventLog(self.recorder_log, self.pipeline_name))
        self.events = SesEvents(recorder, self.recorder_log, self.clock, d.aws.account_id)
        self.sent_before = Counter(key_of_send(m) for m in d.aws.sent_emails())
        self.weather = WEATHERS["in time"]
        self.instance: Consumer | None = None
        self.instance_log = io.StringIO()
        self.instances = 0
        self.next_faults = InvocationFaults()
        self.next_throttle: str | bool | None = False  # False: none; None: every DynamoDB call; else one operation
        self.faulty_invocations = 0  # how many invocations from now meet next_faults and next_throttle
        self.ses_script: list[Fault] = []  # SES's scripted answers not met yet, as the proxy holds them
        self.doubles_checked: set[tuple[str, int]] = set()
        self._exit = contextlib.ExitStack()  # last: a world that failed to start leaves no module on its clock
        self._exit.enter_context(modules_on_clock(self.clock))

    def close(self) -> None:
        self._exit.close()
        self.d.ses_proxy.clear()
        self.d.slow.clear()

    def note(self, text: str) -> None:
        self.story.journal.append(f"[{self.story.next_order()}] t+{self.elapsed()} {text}")

    def elapsed(self) -> str:
        seconds = (self.clock.now_ms() - self.start_ms) // 1000
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"

    # -- the consumer ---------------------------------------------------------------------------------------------

    def consumer(self) -> Consumer:
        """The Lambda instance the next batch goes to: the last one, unless it died (or a new one was asked for)."""
        if self.instance is None:
            self.instances += 1
            self.instance_log = io.StringIO()
            self.instance = Consumer.from_clients(self.settings, self.d.consumer_dynamodb, self.d.consumer_ses,
                                                  self.d.consumer_sqs, self.clock,
                                                  OutcomeLog(self.instance_log, pipeline=self.pipeline_name))
            # The delays' jitter drawn from the run's seed, so a run replays.
            with contextlib.suppress(AttributeError):
                self.instance.redelivery._random = random.Random(self.seed * 1000 + self.instances)
        return self.instance

    def invoke(self, batch: list[QueuedMessage]) -> None:
        """One invocation, as Lambda makes it: the batch handed over, all but its failures deleted once it answers;
        with the faults the rules armed for it."""
        order = self.story.order + 1
        started = self.elapsed()
        consumer = self.consumer()
        faults, throttle = self.next_faults, self.next_throttle
        self.faulty_invocations -= 1
        if self.faulty_invocations <= 0:
            self.next_faults, self.next_throttle = InvocationFaults(), False
        before = self.ledger()
        self._observe_records(before)
        records = self.queue.hand_over(batch)
        context = FakeContext(self.clock, budget_ms=FUNCTION_TIMEOUT_MS)
        log_start = len(self.instance_log.getvalue().splitlines())
        pending_before = self.d.ses_proxy.pending()
        if throttle is not False:
            self.d.slow.fault(Rule("dynamodb", throttle, "ProvisionedThroughputExceededException"))
        self.d.call_faults.arm(faults, context.deadline_ms)
        killed = ""
        response: dict[str, Any] = {"batchItemFailures": []}
        try:
            response = consumer.handle(event(*records), context)
            if faults.kill_after_call is not None:
                killed = "killed after its last AWS call, before it answered"
        except WorkerKilled:
            killed = "killed"
        finally:
            happened = list(self.d.call_faults.happened)
            self.d.call_faults.disarm()
            if throttle is not False:
                self.d.slow.clear()
        met = self.ses_script[:pending_before - self.d.ses_proxy.pending()]
        del self.ses_script[:len(met)]
        outcomes = self._outcomes(log_start)
        failed = failed_ids(response)
        for message in batch:
            ended = "killed" if killed else outcomes.get(message.message_id) or (
                "group_blocked" if message.message_id in failed else "unlogged")
            message.outcomes[-1] = ended
            if message.key in self.story.parked and ended in PARKED:
                self.story.parked[message.key].append(self.clock.now_ms())
            if message.key in self.story.marked_unknown and ended == "marked_unknown":
                self.story.marked_unknown[message.key].append(order)
        # A mark whose worker was killed, or whose answer was lost, before it logged the outcome is still a mark:
        # the ledger says so.
        now, after = self.clock.now_ms(), self.ledger()
        for key in {m.key for m in batch if m.key in self.story.marked_unknown}:
            was, record = before.get(key), after.get(key)
            if (live(record, now) and record is not None and record.status == "UNKNOWN"
                    and not (live(was, now) and was is not None and was.status == "UNKNOWN")
                    and order not in self.story.marked_unknown[key]):
                self.story.marked_unknown[key].append(order)
        if killed:
            self.instance = None  # a killed instance is gone; Lambda starts another
        else:
            self.queue.acknowledge(batch, failed)
        # What leaves a send undecided: a crash, a lost answer, an ambiguous send; on a FIFO queue also a claim
        # DynamoDB would not let the worker take back (no copy carries its token: the guarantees' FIFO note).
        if (killed or faults.lose_answer_of_call is not None or faults.lose_request_of_call is not None
                or any(o in MAY_HAVE_SENT for o in outcomes.values())
                or any(f in SES_FAULTS_THAT_MAY_HAVE_SENT for f in met) or (self.fifo and throttle is not False)):
            for key in {m.key for m in batch if m.key in self.story.crashes}:
                self.story.crashes[key].append(order)
        emails = self.events.take_new_sends(self.weather, order, key_of_send)
        for email in emails:
            self._add_email(email)
        shown = ", ".join(f"{self.names.get(m.key or '', m.key)}/{m.message_id[:4]}(receive {m.receive_count}): "
                          f"{m.outcomes[-1]}" for m in batch)
        self.story.order = order
        self.story.journal.append(
            f"[{order}] t+{started} invocation: {shown}" + (f"; SES answered {[f.value for f in met]}" if met else "")
            + ("" if faults.none else f"; armed: {faults}")
            + (f"; DynamoDB throttled ({throttle or 'every call'})" if throttle is not False else "")
            + (f"; {'; '.join(happened)}" if happened else "") + (f"; {killed}" if killed and not happened else "")
            + (f"; emails sent: {[self.names[e.key] for e in emails]}" if emails else ""))
        self._check_dead_letters()  # as the ledger stood when they were sent: an operator may resolve a key later

    def _outcomes(self, log_start: int) -> dict[str, str]:
        """Each record's outcome, by message id, from the instance's log lines since ``log_start``; a line counting
        DoubleSends (a completion that found another email's id) is the consumer's report of a double."""
        outcomes = {}
        for line in self.instance_log.getvalue().splitlines()[log_start:]:
            entry = json.loads(line)
            if "messageId" in entry:
                outcomes[str(entry["messageId"])] = str(entry.get("outcome"))
            if entry.get("DoubleSends") == 1 and entry.get(Ledger.KEY):
                self.events.doubles_reported.add(str(entry[Ledger.KEY]))
        return outcomes

    # -- what the ledger says ---------------------------------------------------------------------------------------

    def ledger(self) -> dict[str, EmailRecord]:
        answer = self.d.dynamodb.batch_get_item(RequestItems={self.d.table: {
            "Keys": [{Ledger.KEY: {"S": key}} for key in self.story.keys], "ConsistentRead": True}})
        items = answer.get("Responses", {}).get(self.d.table, [])
        return {item[Ledger.KEY]["S"]: EmailRecord.from_item(item) for item in items}

    def _observe_records(self, records: dict[str, EmailRecord]) -> None:
        """A key whose record is absent or expired has ended its lifetime: its next email starts another."""
        now = self.clock.now_ms()
        for key in self.story.keys:
            if not live(records.get(key), now):
                self.story.record_ended[key] = True

    def _add_email(self, email: Email) -> None:
        lifetimes = self.story.lifetimes[email.key]
        if self.story.record_ended[email.key] or not lifetimes:
            lifetimes.append(Lifetime())
            self.story.record_ended[email.key] = False
        lifetimes[-1].emails.append(email)

    # -- time ------------------------------------------------------------------------------------------------------

    def run_until(self, target_ms: int, behind_ms: int = 0, invocations: int = INVOCATIONS_PER_STEP,
                  jump: bool = True) -> bool:
        """Move the clock on to ``target_ms`` with the pipeline running: each message handed over when it is due (or
        ``behind_ms`` after: a backlog Lambda's event source works through), each event when it reaches the
        recorder. False if the invocations ran out first (the clock stops there); with ``jump`` False the clock
        stops at the last thing that happened."""
        for _ in range(invocations):
            self._deliver_events()
            self._watch_the_room()
            batch = self.queue.next_batch(BATCH_SIZE, behind_ms)
            if batch:
                self.invoke(batch)
                self.check_doubles_as_they_happen()
                continue
            now = self.clock.now_ms()
            due = self.queue.next_due_ms(now - behind_ms)
            upcoming = [t for t in (None if due is None else due + behind_ms, self.events.next_due_ms(now),
                                    self._next_release_ms()) if t is not None]
            if not upcoming or min(upcoming) > target_ms:
                break
            self.clock.now = min(upcoming)
        else:
            return False
        if jump:
            self.clock.now = max(self.clock.now, target_ms)
            self._deliver_events()
        return True

    def _watch_the_room(self) -> None:
        """EventBridge's schedule, played: the watch runs each minute of the fake clock (once for the minutes a
        jump passed over, as a watch that was down catches up)."""
        if self.watch is None or self.clock.now_ms() < self.next_watch_ms:
            return
        released, _, _ = self.watch.run()
        if released:
            self.note(f"the schedule watch sent {released} job(s) back from the waiting room")
        self.next_watch_ms = self.clock.now_ms() + WATCH_EVERY_S * 1000

    def _next_release_ms(self) -> int | None:
        """When the watch next sends a job back: its first run at which the room's earliest job is due within the
        watch's reach."""
        if self.watch is None or self.room is None:
            return None
        stops = self.d.dynamodb.query(TableName=self.room, KeyConditionExpression="#room = :room",
                                      ExpressionAttributeNames={"#room": ROOM}, Limit=1, ConsistentRead=True,
                                      ExpressionAttributeValues={":room": {"S": STOPS}})
        if stops["Items"]:  # a stop's parked jobs: the watch asks SES about it each run
            return self.next_watch_ms
        page = self.d.dynamodb.query(TableName=self.room, KeyConditionExpression="#room = :room",
                                     ExpressionAttributeNames={"#room": ROOM}, Limit=1, ConsistentRead=True,
                                     ExpressionAttributeValues={":room": {"S": room_of(Priority.BULK.value)}})
        if not page["Items"]:
            return None
        reach_ms = due_ms_of(page["Items"][0][DUE]["S"]) - RELEASE_AHEAD_S * 1000 + 1
        return max(self.next_watch_ms, reach_ms)

    def waiting_in_room(self) -> list[str]:
        if self.room is None:
            return []
        items = self.d.dynamodb.scan(TableName=self.room, ConsistentRead=True)["Items"]
        return [self.names.get(item[DEDUPE_KEY]["S"], item[DEDUPE_KEY]["S"]) for item in items if DEDUPE_KEY in item]

    def _deliver_events(self) -> None:
        if self.events.deliver_due():
            self.check_doubles_as_they_happen()

    # -- the producer ---------------------------------------------------------------------------------------------

    def enqueue(self, name: str, path: str, send_at: str, at_limit: bool) -> None:
        key, now = self.keys[name], self.clock.now_ms()
        wait_ms = None if self.fifo else SEND_AT_MS[send_at]  # a FIFO queue takes no sendAt (the producer refuses)
        made = job_for(key, name, self.queue_url, at_limit, None if wait_ms is None else now + wait_ms)
        records = self.ledger()
        self._observe_records(records)
        record = records.get(key)
        lifetimes = self.story.lifetimes[key]
        # A live record stands for its lifetime's emails: SES's word on them, or an email it accepted whose word has
        # not come yet (the test saw it go).
        already_sent = live(record, now) and record is not None and (bool(record.every_ses_message_id) or (
            not self.story.record_ended[key] and bool(lifetimes) and bool(lifetimes[-1].emails)))
        unknown = live(record, now) and record is not None and record.status == "UNKNOWN"
        queued = self._enqueue_by(path, made)
        self.note(f"enqueue {name} via {path}" + (f", sendAt +{wait_ms // 1000} s" if wait_ms else "")
                  + (", at the size limit" if at_limit else "")
                  + ("" if queued else " (the outbox held the key already: nothing new)"))
        if queued:
            self.story.jobs.append(Job(key, self.story.order, now, path, already_sent, unknown))

    def _enqueue_by(self, path: str, made: EmailJob) -> bool:
        """Put the job on its way by ``path``; False when the outbox held its key already (nothing new queued)."""
        if path == "enqueue":
            enqueue(self.queue_url, made, sqs=self.d.producer_sqs, max_message_size_bytes=MAX_MESSAGE_BYTES)
        elif path == "enqueue_many":
            assert enqueue_many(self.queue_url, [made], sqs=self.d.producer_sqs, backoff_s=0,
                                max_message_size_bytes=MAX_MESSAGE_BYTES) == []
        elif path == "DynamoDB outbox":
            return self._through_dynamodb_outbox(made)
        else:
            return self._through_sql_outbox(made)
        return True

    def _through_dynamodb_outbox(self, made: EmailJob) -> bool:
        d = self.d
        held = "Item" in d.dynamodb.get_item(TableName="outbox", Key={OutboxItem.KEY: {"S": made.dedupe_key}})
        d.dynamodb.transact_write_items(TransactItems=[outbox_put("outbox", made)])
        page = d.streams.get_records(ShardIterator=d.stream_position)
        d.stream_position = page["NextShardIterator"]
        if held:
            return False  # DynamoDB writes no stream record for an item left as it was (the emulator writes one)
        inserts = [r for r in page["Records"] if r["eventName"] == "INSERT"
                   and OutboxItem.JOB in r["dynamodb"].get("NewImage", {})]
        assert relay_stream_records(inserts[-1:], d.producer_sqs, self.queue_url, self.fifo) == []
        return True

    def _through_sql_outbox(self, made: EmailJob) -> bool:
        relay = self.d.sql_relay
        relay.retain()  # the relay deletes relayed rows past its retention as it runs
        connection = sqlite3.connect(str(self.d.sql_path))
        try:
            added = sql_outbox.add(connection, made)
            connection.commit()
        finally:
            connection.close()
        while relay.relay_batch().claimed:
            pass
        return bool(added)

    def cancel(self, name: str, via: str) -> None:
        key = self.keys[name]
        if via == "cancel":
            result = cancel(self.d.table, key, dynamodb=self.d.dynamodb)
            cancelled, record = result.cancelled, result.record
        else:
            answer = json.loads(self.operator(["--json", "--table", self.d.table, "cancel", key]))
            cancelled, record = bool(answer["cancelled"]), self.ledger().get(key)
        stands_until_ms = (record.expires_at_s or 0) * 1000 if cancelled and record is not None else 0
        self.note(f"cancel {name} via {via}: " + ("cancelled" if cancelled else
                                                  f"too late ({record.status if record else '?'})"))
        self.story.cancels.append(Cancel(key, self.story.order, cancelled, stands_until_ms))

    # -- the operator --------------------------------------------------------------------------------------------

    def operator(self, argv: list[str]) -> str:
        """``sendonce ARGV`` as an operator runs it, on the fake clock (its SQS calls played on it too)."""
        output = io.StringIO()
        with contextlib.redirect_stdout(output), _operator_clients(self.d):
            code = sendonce(argv)
        assert code in (0, 1), f"sendonce {' '.join(argv)} exited {code}: {output.getvalue()}"
        return output.getvalue()

    def resolve(self, unknown_only: bool = False) -> bool:
        """What an operator does with ``sendonce unknown``: a key SES sent in its lifetime is resolved ``--sent``,
        any other ``--resend`` and its job enqueued again (it is no longer queued). ``unknown_only``: the UNKNOWN
        records only, the ones the guarantees leave to a person. True if anything was resolved."""
        listed = json.loads(self.operator(["--json", "--table", self.d.table, "unknown"]))
        resolved = False
        for entry in listed:
            key = entry.get("key")
            if key not in self.names or (unknown_only and entry.get("status") != "UNKNOWN"):
                continue
            lifetimes = self.story.lifetimes[key]
            sent = bool(lifetimes) and not self.story.record_ended[key] and bool(lifetimes[-1].emails)
            self.operator(["--table", self.d.table, "resolve", "--sent" if sent else "--resend", key])
            resolved = True
            self.note(f"operator: resolve {self.names[key]} ({entry.get('status')}) "
                      + ("--sent" if sent else "--resend, and enqueues its job again"))
            if not sent:
                self.story.record_ended[key] = True
                self.enqueue(self.names[key], "enqueue", "now", False)
        return resolved

    def redrive(self) -> None:
        said = self.operator(["--table", self.d.table, "--queue", self.queue_url, "--dlq", self.dlq_url,
                              "--dedupe-ttl", str(DEDUPE_TTL_S), "dlq", "redrive"])
        self.note(f"operator: sendonce dlq redrive: {said.strip().splitlines()[0] if said.strip() else ''}")

    def doubles_listed(self) -> set[str]:
        return {entry["key"] for entry in json.loads(self.operator(["--json", "--table", self.d.table, "doubles"]))}

    # -- the invariants ---------------------------------------------------------------------------------------------

    def fail(self, what: str) -> None:
        names = ", ".join(f"{name} = {key}" for name, key in self.keys.items())
        raise AssertionError(f"{what}\n\nkeys: {names}\nwhat happened (the last 40):\n"
                             + "\n".join(self.story.journal[-40:]) + f"\n\nrerun: {rerun(self.d.test_id)}")

    def check(self) -> None:
        self._check_cancels()
        self._check_doubles(self.ledger())
        self._check_dead_letters()

    def check_doubles_as_they_happen(self) -> None:
        """A double is checked while its record lives (``sendonce doubles`` lists live records only): as soon as a
        lifetime has a second email, and whenever SES's events come."""
        if any(len(lifetime.emails) >= 2 and (key, number) not in self.doubles_checked
               for key, lifetimes in self.story.lifetimes.items() for number, lifetime in enumerate(lifetimes)):
            self._check_doubles(self.ledger())

    def _check_cancels(self) -> None:
        for cancelled in (c for c in self.story.cancels if c.cancelled):
            for email in (e for lifetime in self.story.lifetimes[cancelled.key] for e in lifetime.emails):
                if email.order <= cancelled.order:
                    continue
                enqueued_since = any(j.key == cancelled.key and cancelled.order < j.order < email.order
                                     and j.enqueued_ms > cancelled.stands_until_ms for j in self.story.jobs)
                if not enqueued_since:
                    self.fail(f"{self.names[cancelled.key]} was sent (step {email.order}) after a cancel that "
                              f"answered cancelled (step {cancelled.order}), no job of it enqueued after the "
                              "tombstone expired")

    def _check_doubles(self, records: dict[str, EmailRecord]) -> None:
        now = self.clock.now_ms()
        for key, lifetimes in self.story.lifetimes.items():
            name = self.names[key]
            for number, lifetime in enumerate(lifetimes):
                if len(lifetime.emails) < 2:
                    continue
                first, second = lifetime.emails[0], lifetime.emails[1]
                if self.policy is NEVER:
                    self.fail(f"{name} sent twice in one lifetime under never-resend (steps {first.order} and "
                              f"{second.order})")
                if not any(first.order <= crash <= second.order for crash in self.story.crashes[key]):
                    self.fail(f"{name} sent twice in one lifetime (steps {first.order} and {second.order}) with no "
                              "crash, lost answer or ambiguous send of it in between")
                record = records.get(key)
                current = number == len(lifetimes) - 1 and not self.story.record_ended[key]
                if (not current or record is None or record.expired(now) or len(record.every_ses_message_id) < 2
                        or (key, number) in self.doubles_checked):
                    continue
                self.doubles_checked.add((key, number))
                if key not in self.events.doubles_reported:
                    self.fail(f"{name} was sent twice and the ledger knows both ids {record.every_ses_message_id}, "
                              "but neither the recorder nor the consumer counted DoubleSends for it")
                if key not in self.doubles_listed():
                    self.fail(f"{name} was sent twice and the ledger knows both ids, but `sendonce doubles` does "
                              "not list it")
        for key, record in records.items():
            if record.status == "UNKNOWN" and not record.expired(now):
                if self.policy is not NEVER:
                    self.fail(f"{self.names[key]} is UNKNOWN under resend-without-evidence")
                if not self.story.crashes[key]:
                    self.fail(f"{self.names[key]} is UNKNOWN with no crash, lost answer or ambiguous send of it")

    def _check_dead_letters(self) -> None:
        """Each dead letter judged once, at the first check after it was sent: against the key's record then, not
        a later lifetime's (a resolve --resend, a new claim past dedupe_ttl, counts its sends afresh)."""
        judged, self.dead_letters_judged = self.dead_letters_judged, len(self.queue.dead_letters)
        for dead in self.queue.dead_letters[judged:]:
            why = self._why_not_allowed(dead.reason_code, dead.key, dead.source_message_id, dead.sent_ms)
            if why:
                self.fail(f"{self.names.get(dead.key or '', dead.key)} dead-lettered with {dead.reason_code} "
                          f"({dead.reason}): {why}")

    def _possible_sends(self, key: str | None) -> int:
        """The key's sends that may have gone, as its record counts them (claims less those SES refused)."""
        record = self.ledger().get(key or "")
        return 0 if record is None else record.attempts - record.refused_sends

    def _why_not_allowed(self, code: str, key: str | None, source_message_id: str | None, at_ms: int) -> str:
        """Why a dead letter breaks the guarantees ('' when they allow it)."""
        source = self.queue.messages.get(source_message_id or "")
        outcomes = source.outcomes if source is not None else []
        spent = [o for o in outcomes if o in (FIFO_SPENDS_A_RECEIVE if self.fifo else SPENDS_A_RECEIVE)]
        if code == ReasonCode.MAX_RECEIVES.value:
            if len(spent) >= MAX_RECEIVE_COUNT - 1 or (self.fifo and self._possible_sends(key) >= MAX_RECEIVE_COUNT):
                return ""
            return f"its receives went on what never spends one: {outcomes}"
        if code == ReasonCode.REDRIVEN_BY_SQS.value:
            if self.fifo:  # its last receives, kept for failures, all failed
                last = outcomes[-FIFO_RECEIVES_KEPT_FOR_FAILURES:]
                if len(outcomes) >= MAX_RECEIVE_COUNT and not FIFO_WAITS.intersection(last):
                    return ""
            elif len(spent) >= MAX_RECEIVE_COUNT:
                return ""
            return f"SQS moved it, its receives having gone on {outcomes}"
        if code == ReasonCode.SES_PAUSED.value:
            parked = key is not None and any(t <= at_ms for t in self.story.parked.get(key, []))
            parkable_ms = (RETENTION_S - parked_margin_s(RETENTION_S)) * 1000 - 900_000
            waited = any(j.key == key and at_ms - j.enqueued_ms >= parkable_ms for j in self.story.jobs)
            return "" if parked and waited else "it was not parked as long as the queue keeps a message"
        return "nothing in this run is refused for good"

    def finish(self) -> None:
        """The end of a run: the faults stop, SES sends, the pipeline runs until its queue drains and an operator
        decides the UNKNOWN keys; then every job has ended, each as the guarantees allow."""
        self.d.ses_proxy.clear()
        self.ses_script.clear()
        self.next_faults, self.next_throttle, self.faulty_invocations = InvocationFaults(), False, 0
        self.weather = WEATHERS["in time"]
        self.d.ses.put_account_sending_attributes(SendingEnabled=True)
        self.note("the end: the faults stop, SES sends, the pipeline drains")
        drained = False
        for _ in range(3):
            drained = self.run_until(self.clock.now_ms() + DRAIN_MS, invocations=DRAIN_INVOCATIONS, jump=False)
            if not (self.policy is NEVER and self.resolve(unknown_only=True)):
                break
        self.check()
        self.queue.settle()
        dead = self._dead_letter_queue()
        left = [f"{self.names.get(m.key or '', m.key)}/{m.message_id[:4]} ({m.origin}, outcomes {m.outcomes})"
                for m in self.queue.live()]
        counts = self.d.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        left += [f"{name} (in the waiting room)" for name in self.waiting_in_room()]
        if left or not drained or any(int(n) for n in counts.values()):
            self.fail(f"the queue did not drain in {DRAIN_INVOCATIONS} invocations and {DRAIN_MS // 60_000} "
                      f"minutes: {left or counts}")
        for job in self.story.jobs:
            self._check_ended(job, dead)
        emails = Counter(key_of_send(m) for m in self.d.aws.sent_emails()) - self.sent_before
        counted = Counter(e.key for e in self.events.emails.values())
        assert +emails == +counted, (emails, counted)

    def _dead_letter_queue(self) -> list[tuple[str | None, str, int]]:
        """(key, reason code, when) of each message in the DLQ now; one SQS moved there is checked against the
        guarantees here (the consumer's were as it sent them), and is no longer the job queue's."""
        found: dict[str, dict[str, Any]] = {}
        while True:
            page = self.d.sqs.receive_message(QueueUrl=self.dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                              MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"])
            fresh = [m for m in page.get("Messages", []) if m["MessageId"] not in found]
            if not fresh:
                break
            found.update((m["MessageId"], m) for m in fresh)
        dead = []
        for message_id, message in found.items():
            attributes = {n: v.get("StringValue", "") for n, v in message.get("MessageAttributes", {}).items()}
            code = attributes.get(DeadLetter.REASON_CODE, ReasonCode.REDRIVEN_BY_SQS.value)
            key = attributes.get(DeadLetter.DEDUPE_KEY) or json.loads(message["Body"]).get("dedupeKey")
            at_ms = self.queue.sent_ms_of(message_id) or self.clock.now_ms()
            moved = self.queue.messages.get(message_id)
            if moved is not None and moved.gone is None:  # a FIFO message SQS moved while its group waited
                moved.gone = Gone.MOVED
            if code == ReasonCode.REDRIVEN_BY_SQS.value:
                why = self._why_not_allowed(code, key, message_id, at_ms)
                if why:
                    self.fail(f"{self.names.get(key, key)} in the DLQ, moved there by SQS with no reason: {why}")
            dead.append((key, code, at_ms))
        return dead

    def _check_ended(self, job: Job, dead: list[tuple[str | None, str, int]]) -> None:
        """Sent (an email of its key after it was enqueued, or its key's live record had one), cancelled (a cancel
        that answered cancelled, its tombstone standing when the job was enqueued), in the DLQ, or, under
        never-resend, recorded UNKNOWN for a person (the invariants hold that to a crash)."""
        emails = [e for lifetime in self.story.lifetimes[job.key] for e in lifetime.emails]
        if job.already_sent or any(e.order > job.order for e in emails):
            return
        if self.policy is NEVER and (job.left_for_a_person
                                     or any(order > job.order for order in self.story.marked_unknown[job.key])):
            return
        if any(c.key == job.key and c.cancelled and job.enqueued_ms <= c.stands_until_ms
               for c in self.story.cancels):
            return
        if any(key == job.key and at_ms >= job.enqueued_ms for key, _, at_ms in dead):
            return
        fates = [f"{m.message_id[:4]} ({m.origin}, {m.gone or 'in the queue'}, outcomes {m.outcomes})"
                 for m in self.queue.messages.values() if m.key == job.key]
        self.fail(f"{self.names[job.key]} was lost: its job enqueued at step {job.order} via {job.path} was never "
                  f"sent, cancelled nor dead-lettered; its key's messages: {fates}")


@contextlib.contextmanager
def _operator_clients(deployment: Deployment) -> Iterator[None]:
    """The operator's command makes its clients with boto3: its SQS client is one played on the fake clock."""
    import sendonce_ops.cli as cli

    class Boto3:
        @staticmethod
        def client(service: str, *args: Any, **kwargs: Any) -> Any:
            return deployment.operator_sqs if service == "sqs" else boto3.client(service, *args, **kwargs)

    saved = cli.boto3
    cli.boto3 = Boto3  # type: ignore[assignment]
    try:
        yield
    finally:
        cli.boto3 = saved


key_names = st.sampled_from(KEY_NAMES)


class Lifecycle(RuleBasedStateMachine):
    """The rules and invariants of the module's docstring; ``deployment`` is set per test."""

    deployment: Deployment

    def __init__(self) -> None:
        super().__init__()
        self.world: World | None = None

    @property
    def w(self) -> World:
        assert self.world is not None
        return self.world

    @initialize(parallelism=st.sampled_from([1, 10]), seed=st.integers(0, 2**31), waiting_room=st.booleans())
    def deploy(self, parallelism: int, seed: int, waiting_room: bool) -> None:
        self.world = World(self.deployment, parallelism, seed, waiting_room and not self.deployment.fifo)
        self.w.note(f"a {'FIFO' if self.w.fifo else 'standard'} pipeline, {self.w.policy.value}, parallelism "
                    f"{parallelism}" + (", a waiting room for scheduled jobs" if self.w.watch else ""))

    @rule(key=key_names, path=st.sampled_from(ENQUEUE_PATHS), send_at=st.sampled_from(list(SEND_AT_MS)),
          at_limit=st.booleans())
    def enqueue(self, key: str, path: str, send_at: str, at_limit: bool) -> None:
        self.w.enqueue(key, path, send_at, at_limit)

    @rule(key=key_names)
    def enqueue_again_after_dedupe_ttl(self, key: str) -> None:
        self.w.run_until(self.w.clock.now_ms() + 1_000)  # what is due now is handed over first
        record = self.w.ledger().get(self.w.keys[key])
        target = self.w.clock.now_ms() + DEDUPE_TTL_S * 1000 + 2_000
        if record is not None and record.expires_at_s is not None:
            target = min(target, record.expires_at_s * 1000 + 2_000)  # a tombstone outlives dedupe_ttl
        reached = self.w.run_until(max(target, self.w.clock.now_ms()))
        self.w.note((f"{key}: dedupe_ttl passed (no record)" if record is None
                     else f"{key}: its {record.status} record's expiresAt passed")
                    + ("" if reached else " (in part: the step's invocations ran out)"))
        self.w.enqueue(key, "enqueue", "now", False)

    @rule(key=key_names, via=st.sampled_from(["cancel", "sendonce cancel"]))
    def cancel(self, key: str, via: str) -> None:
        self.w.cancel(key, via)

    @rule()
    def a_moment_passes(self) -> None:
        """Lambda's event source hands over what is due within a second (the commonest step)."""
        self.w.run_until(self.w.clock.now_ms() + 1_000)

    @rule(span=st.sampled_from(list(SPANS_MS)), backlog=st.sampled_from(["keeping up", *BACKLOGS_MS]))
    def time_passes(self, span: str, backlog: str) -> None:
        """Time passes with the pipeline running, Lambda's event source keeping up or working through a backlog
        (each message handed over that long after it is due)."""
        reached = self.w.run_until(self.w.clock.now_ms() + SPANS_MS[span], BACKLOGS_MS[backlog])
        self.w.note(f"{span} passed" + (f", the event source {backlog}" if BACKLOGS_MS[backlog] else "")
                    + ("" if reached else " (in part: the step's invocations ran out)"))

    @rule(how=st.sampled_from(list(GOES_WRONG)), call=st.integers(0, 7), invocations=st.sampled_from([1, 1, 5]))
    def next_invocations_go_wrong(self, how: str, call: int, invocations: int) -> None:
        """Armed for the next ``invocations``: killed after the ``call``-th AWS call (0: before any), that call's
        answer (or its request) lost, that call answering late, or DynamoDB throttling them."""
        self.w.faulty_invocations = invocations
        if how in THROTTLED_OPERATIONS:
            self.w.next_throttle = THROTTLED_OPERATIONS[how]
            return
        field_name, late_ms = GOES_WRONG[how]
        number = call if field_name == "kill_after_call" else max(call, 1)  # a call to lose or slow is one at least
        change = {field_name: number, **({"slow_ms": late_ms} if late_ms else {})}
        self.w.next_faults = dataclasses.replace(self.w.next_faults, **change)

    @rule(faults=st.one_of(st.lists(st.sampled_from(SES_FAULTS), min_size=1, max_size=3),
                            st.sampled_from([[Fault.THROTTLE] * 6, [Fault.QUOTA] * 6])))
    def ses_answers(self, faults: list[Fault]) -> None:
        self.w.d.ses_proxy.script(*faults)
        self.w.ses_script += faults
        self.w.note(f"SES's next answers: {[f.value for f in faults]}")

    @rule(sending=st.booleans())
    def ses_account(self, sending: bool) -> None:
        """SES pauses the account's sending, or sends again."""
        self.w.d.ses.put_account_sending_attributes(SendingEnabled=sending)
        self.w.note("SES sends again" if sending else "SES pauses the account's sending")

    @rule(weather=st.sampled_from(list(WEATHERS)))
    def ses_events_from_now(self, weather: str) -> None:
        self.w.weather = WEATHERS[weather]
        self.w.note(f"SES's events from now: {weather}")

    @rule()
    def new_lambda_instance(self) -> None:
        self.w.instance = None

    @rule(action=st.sampled_from(["resolve", "dlq redrive"]))
    def operator(self, action: str) -> None:
        if action == "resolve":
            self.w.resolve()
        else:
            self.w.redrive()

    @invariant()
    def promises_kept(self) -> None:
        if self.world is not None:
            self.world.check()

    def teardown(self) -> None:
        if self.world is None:
            return
        try:
            self.world.finish()
        finally:
            if os.environ.get("SENDONCE_LIFECYCLE_JOURNAL"):
                print("\n".join(self.world.story.journal), end="\n\n")
            self.world.close()


# No example database: the seed alone decides a run. A run's first failure ends it: in `make test` it is reported
# as found (its steps, its seed); rerun with its seed, the same failure is shrunk to its fewest steps. (Shrinking
# replays the world hundreds of times: minutes. Hypothesis's explain phase would rerun it more.)
SETTINGS = settings(max_examples=examples(6), stateful_step_count=20, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate, *([Phase.shrink] * REPLAYING)],
                    suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)


@pytest.fixture
def ses_proxy(aws: Any) -> Iterator[SesFaultProxy]:
    proxy = SesFaultProxy(aws.endpoint).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
@pytest.mark.parametrize("policy", [RESEND, NEVER], ids=lambda p: p.value)
def test_each_job_is_sent_once_cancelled_or_dead_lettered_with_its_reason(aws, slow, ses_proxy, tmp_path, policy,
                                                                          fifo, request):
    deployment = Deployment(aws, slow, ses_proxy, tmp_path, policy, fifo, request.node.nodeid)
    try:
        machine = type("Lifecycle", (Lifecycle,), {"deployment": deployment})
        hypothesis_seed(SEED)(machine)
        try:
            run_state_machine_as_test(machine, settings=SETTINGS)
        except BaseException as error:  # the harness's own errors too
            error.add_note(f"rerun: {rerun(deployment.test_id)}")
            raise
    finally:
        deployment.close()
