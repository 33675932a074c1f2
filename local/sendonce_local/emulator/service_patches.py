"""moto's DynamoDB, SQS and EventBridge made to answer as the services do where sendonce depends on it; what each
patch is for is said in :mod:`.patches`, which installs them."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.events.models import Rule as EventsRule
from moto.sqs.models import Queue, SQSBackend

from .wrap import wrap_once

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

