"""SQS fair queues, played by the emulator's SQS: on a standard queue whose messages carry a ``MessageGroupId`` (a
tenant), a receive hands out quiet tenants' messages before a noisy tenant's. moto hands out a standard queue's
messages in the order they were sent, so one tenant's flood would hold every other tenant's email behind it.

What AWS documents (SQS Developer Guide, "How Amazon SQS fair queues work"): a tenant is noisy when it holds more
than 10% of the queue's in-flight messages and at least 30 of them (its concurrency share), or more than 10% of the
consumers' recent processing time (its processing-time share). While a tenant is noisy, a consumer's receive gets
quiet tenants' messages whenever any are waiting; among noisy tenants, the one with the fewest messages in flight
comes first. Nothing is dropped or throttled: a noisy tenant's messages only wait longer, and come as usual when no
quiet tenant's are waiting. A message without a group id is a tenant of its own. A tenant is quiet again once its
backlog is gone, or after 5 minutes without sending.

What is played here, and how (an approximation, said openly in the docs' tenants page):

- the concurrency share as AWS states it: more than 10% of the queue's messages in flight, at least 30 of them;
- the processing-time share by a proxy: the tenant's share of the messages received from the queue in the last
  :data:`RECENT_S` seconds (the emulator cannot see how long a consumer spends on each message; per email a
  sendonce consumer spends about the same on every tenant's). With a few local pollers, fewer than 30 messages
  are ever in flight, so this is the rule that acts locally;
- the order: a receive takes the visible messages with quiet tenants' (and group-less ones) first, in the order
  they were sent, then noisy tenants', fewest in flight first; within a tenant, the order they were sent. The
  receive returns them in that order, so a quiet tenant's message is the first record of the batch it is in.
  AWS says which messages a receive favours, not where they sit in its answer; a paced batch holds one
  instance's second of sends, so the order within it matters little to sendonce.

Not played: SQS's distributed, approximate thresholds, and its 5 minutes of silence (the window here is shorter).
FIFO queues are left alone: their groups mean order, not tenants.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

from .wrap import wrap_once

SHARE = 0.10  # AWS's threshold for both shares
MIN_IN_FLIGHT = 30  # AWS's: a concurrency share counts from this many of the tenant's messages in flight
RECENT_S = 60.0  # how far back the processing-time share's proxy looks
_lock = threading.Lock()
# Queue name -> (when received, group id); None for a message without one (a tenant of its own, never noisy).
_recent: dict[str, deque[tuple[float, str | None]]] = {}


def play_sqs_fair_queues() -> None:
    """Install the fair-queue play on moto's SQS (idempotent)."""
    from moto.sqs.models import Queue, SQSBackend

    wrap_once(Queue, "messages", _fair_order, "fair queues")
    wrap_once(SQSBackend, "receive_message", _remember_receives, "fair queues")


def forget_receives() -> None:
    """Forget what was received (the emulator's reset)."""
    with _lock:
        _recent.clear()


def noisy_tenants(queue_name: str, in_flight: Counter[str], now: float | None = None) -> set[str]:
    """The tenants of ``queue_name`` that are noisy now, by either share; ``in_flight`` counts each tenant's
    messages in flight."""
    total_in_flight = sum(in_flight.values())
    noisy = {group for group, count in in_flight.items()
             if count >= MIN_IN_FLIGHT and count > SHARE * total_in_flight}
    received = recent_receives(queue_name, now)
    total_received = sum(received.values())
    noisy |= {group for group, count in received.items() if group is not None and count > SHARE * total_received}
    return noisy


def recent_receives(queue_name: str, now: float | None = None) -> Counter[str | None]:
    """Each tenant's messages received from ``queue_name`` in the last :data:`RECENT_S` seconds (None: those
    without a group id, each a tenant of its own)."""
    cutoff = (time.time() if now is None else now) - RECENT_S
    with _lock:
        window = _recent.get(queue_name)
        if window is None:
            return Counter()
        while window and window[0][0] < cutoff:
            window.popleft()
        return Counter(group for _, group in window)


def fair_order(messages: list[Any], noisy: set[str], in_flight: Counter[str]) -> list[Any]:
    """``messages`` (in the order they were sent) as a fair queue hands them out."""

    def rank(message: Any) -> tuple[int, int]:
        group = message.group_id
        if group is None or group not in noisy:
            return (0, 0)
        return (1, in_flight[group])

    return sorted(messages, key=rank)  # stable: each tenant's own messages keep their order


def _fair_order(messages: Any) -> Any:
    """``Queue.messages`` (a property) in a fair queue's order."""
    visible = messages.fget
    assert visible is not None

    def fair(queue: Any) -> list[Any]:
        found: list[Any] = visible(queue)
        if queue.fifo_queue or not any(m.group_id for m in found):
            return found
        in_flight = Counter(m.group_id for m in queue.pending_messages if m.group_id and not m.visible)
        noisy = noisy_tenants(queue.name, in_flight)
        return fair_order(found, noisy, in_flight) if noisy else found

    return property(fair)


def _remember_receives(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        found = receive(self, queue_name, *args, **kwargs)
        if found and not self.get_queue(queue_name).fifo_queue:
            now = time.time()
            with _lock:
                window = _recent.setdefault(queue_name, deque())
                window.extend((now, m.group_id or None) for m in found)
                while window[0][0] < now - RECENT_S:
                    window.popleft()
        return found

    return receive_message
