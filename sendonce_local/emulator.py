"""An embedded AWS emulator: moto's server on a free loopback port, made faithful where sendonce needs it.

- moto checks a condition and writes the item without a lock, so two racing conditional writes can both win,
  which DynamoDB never allows. A lock serialises item writes, so a race fails for the consumer's fault only.
- moto's SQS backend moves messages between its lists without a lock: under concurrent pollers a receive fails
  inside moto (``list.remove(x): x not in list``, a 500) and a message can be handed out twice. One lock
  serialises the calls that move messages; a long poll waits outside it.
- moto's SQS reads the clock through datetime arithmetic for every message it looks at, and checks a received
  message's retention by computing every attribute of its queue (three passes over all its messages), so one
  receive from a queue of n messages costs O(n^2): a few hundred waiting jobs slowed each call past the consumer's
  timeouts. The clock is read as ``time.time()`` (the same instant) and retention from the queue's own field.
- moto's CloudFormation is made redeployable (``cloudformation_patches``: change sets, outputs, rollback,
  FIFO names, alarms).
- moto's SES keeps no configuration set or tags and publishes no events: each accepted send is logged with
  them, for the local SES event publisher (``ses_publisher``) to play SES's part.
- moto's SES has no sending rate: a load scenario can give it one (``ses_limits``), refusing the excess with
  SES's own throttling error.
- moto delivers to a mapped function itself, through Docker, inside the write that feeds it. With no Docker,
  for SQS it receives the batch (raising its receive count, hiding it for the visibility timeout) and fails;
  for a DynamoDB stream it may then drop the shard's records. Here the local runners play the mappings
  instead, so moto's own delivery is switched off for both. The mappings stay deployed and readable.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import urllib.request
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.events.models import Rule as EventsRule
from moto.server import ThreadedMotoServer
from moto.sqs.models import Queue, SQSBackend

from .cfn_secrets import teach_cloudformation_secrets
from .cloudformation_patches import make_cloudformation_redeployable
from .moto_patches import wrap_once
from .ses_limits import SES_RATE, limit_ses_sends
from .ses_publisher import SEND_LOG, record_ses_sends

DEFAULT_REGION = "us-east-1"
_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")
_write_lock = threading.RLock()
_SQS_MOVES = ("send_message", "send_message_batch", "delete_message", "delete_message_batch",
              "change_message_visibility", "change_message_visibility_batch")
_sqs_lock = threading.RLock()


def make_dynamodb_writes_atomic() -> None:
    """Serialise moto's DynamoDB item writes, as the service does per item (idempotent)."""
    for name in _WRITES:
        wrap_once(DynamoDBBackend, name, _holding(_write_lock), "atomic item writes")


def _holding(lock: threading.RLock) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A wrapper for :func:`wrap_once` whose method runs holding ``lock``."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return method(*args, **kwargs)

        return locked

    return wrap


def make_sqs_linear() -> None:
    """The same answers from moto's SQS, in time linear in a queue's messages (idempotent)."""
    import moto.sqs.models as sqs_models

    if getattr(sqs_models, "_sendonce_linear", False):
        return
    slow_unix_time = getattr(sqs_models, "unix_time")  # noqa: B009 (moto does not export it)

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else float(slow_unix_time(dt))

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    for name, fast in (("unix_time", unix_time), ("unix_time_millis", unix_time_millis), ("_sendonce_linear", True)):
        setattr(sqs_models, name, fast)
    wrap_once(SQSBackend, "is_message_valid_based_on_retention_period", _retention_from_the_queue,
              "linear SQS")


def _retention_from_the_queue(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention_s = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention_s + message.sent_timestamp / 1000 > time.time())

    return is_message_valid_based_on_retention_period


def make_sqs_message_moves_atomic() -> None:
    """Serialise moto's SQS calls that move messages, as the service is consistent per message (idempotent)."""
    for name in _SQS_MOVES:
        wrap_once(SQSBackend, name, _holding(_sqs_lock), "atomic message moves")
    wrap_once(SQSBackend, "receive_message", _receive_polling_outside_the_lock, "atomic message moves")


def _receive_polling_outside_the_lock(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def receive_message(self: Any, queue_name: str, count: int, wait_seconds_timeout: int, visibility_timeout: int,
                        message_attribute_names: list[str] | None = None) -> Any:
        deadline = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with _sqs_lock:  # one pass over the queue, never waiting
                found = receive(self, queue_name, count, 0, visibility_timeout, message_attribute_names)
            remaining = deadline - time.monotonic()
            if found or remaining <= 0:
                return found
            self.get_queue(queue_name).wait_for_messages(min(1.0, remaining))
            time.sleep(min(0.05, max(0.0, remaining)))  # visible but not receivable (a busy FIFO group): no spin

    return receive_message


class RequestCounts:
    """Every request the emulator answered, by service and operation (for a scenario's AWS calls per email)."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def add(self, service: str, operation: str) -> None:
        with self._lock:
            self._counts[service, operation] += 1

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self._counts)


REQUESTS = RequestCounts()


def count_requests() -> None:
    """Count each request moto dispatches to a service (idempotent)."""
    from moto.core.responses import BaseResponse

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def call_action(self: Any) -> Any:
            try:
                REQUESTS.add(str(self.service_name), self._get_action())
            except Exception:  # an operation moto cannot name is still answered as before
                REQUESTS.add(str(self.service_name), "unknown")
            return original(self)

        return call_action

    wrap_once(BaseResponse, "call_action", counted, "request counts")


def _events_skip_scheduled_rules(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def send_to_targets(self: Any, *args: Any, **kwargs: Any) -> Any:
        # On AWS a rule with a schedule (the quota watch's) matches no event put on the bus; moto matches every
        # event against a rule with no pattern and then fails the whole PutEvents on its Lambda target.
        if self.scheduled_expression and not self.event_pattern.get_pattern():
            return None
        return original(self, *args, **kwargs)

    return send_to_targets


def match_no_event_to_scheduled_rules() -> None:
    wrap_once(EventsRule, "send_to_targets", _events_skip_scheduled_rules, "scheduled rules match no event")


def hand_event_sources_to_the_runners() -> None:
    """Queues and tables keep no event source mappings of their own, so no write tries to run a function."""
    for owner in (Queue, Table):
        owner.lambda_event_source_mappings = property(lambda self: {}, lambda self, value: None)  # type: ignore


class LocalAws:
    """A running emulator. ``endpoint`` is ``http://localhost:PORT`` (moto's CloudFormation needs ``localhost``).

    moto keeps one state per process: two emulators started in one process see the same resources and mail.
    """

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = DEFAULT_ACCOUNT_ID) -> None:
        self.region = region
        self.account_id = account_id
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> LocalAws:
        make_dynamodb_writes_atomic()
        make_sqs_message_moves_atomic()
        make_sqs_linear()
        make_cloudformation_redeployable()
        hand_event_sources_to_the_runners()
        record_ses_sends()
        limit_ses_sends()  # outermost: a throttled send never reaches SES's log
        count_requests()
        teach_cloudformation_secrets()
        match_no_event_to_scheduled_rules()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request drowns the output
        # moto names each CloudFormation type it skips; callers say which gaps matter to them.
        logging.getLogger("moto").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message="Tried to parse .* not supported by moto", category=UserWarning)
        self._server.start()
        _, port = self._server.get_host_and_port()
        self.endpoint = f"http://localhost:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def environment(self) -> dict[str, str]:
        """What a process (the CDK CLI, a consumer, a producer) needs to talk to this emulator and nothing else."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "CDK_DEFAULT_ACCOUNT": self.account_id,
            "CDK_DEFAULT_REGION": self.region,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def reset(self) -> None:
        """Forget every resource and sent email (between tests)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        SEND_LOG.clear()
        SES_RATE.limit(None)

    def sent_emails(self) -> list[Any]:
        """What the emulator's SES accepted: moto's Message and RawMessage objects, in order."""
        from moto.ses.models import ses_backends

        return list(ses_backends[self.account_id][self.region].sent_messages)

    def sent_subjects(self) -> list[str]:
        """The subjects of what the emulator's SES accepted, in order (the workloads name each email's key by it)."""
        return [subject_of(message) for message in self.sent_emails()]


def subject_of(sent: Any) -> str:
    """The subject of an email the emulator's SES accepted; '' for a raw message, whose subject is inside it."""
    return str(getattr(sent, "subject", ""))


@contextmanager
def local_aws(region: str = DEFAULT_REGION, fresh: bool = True, pointed: bool = False) -> Iterator[LocalAws]:
    """Start an emulator for the ``with`` block, empty unless ``fresh`` is False; it stops on exit, on error and
    on Ctrl-C. ``pointed``: this process's environment points at it (:attr:`LocalAws.environment`) for the block,
    so every client made in it talks to the emulator, and is restored after."""
    aws = LocalAws(region=region).start()
    if fresh:
        aws.reset()  # the process's moto state may hold another emulator's resources
    saved = dict(os.environ)
    if pointed:
        os.environ.update(aws.environment)
    try:
        yield aws
    finally:
        if pointed:
            os.environ.clear()
            os.environ.update(saved)
        aws.stop()
