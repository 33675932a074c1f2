"""The outcome publisher: each transition of a key's ledger record, read from the table's stream, as one event on
EventBridge. Handler ``sendonce_runtime.outcome_publisher.handler``.

The stream carries every write's before and after images; :func:`sendonce_contract.outcome_events.transitions`
says which outcome events a write made, so exactly the writer that made a transition is the one whose stream
record publishes it. Delivery is at least once per transition: a PutEvents entry that fails is retried, then its
stream record is reported failed so the event source brings it back (in order), and a batch it finally gives up
on goes to the ``OutcomeEventFailures`` queue. A retried event carries the same ``eventId``. The consumer's batch
never waits for any of it.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from sendonce_contract.companion_configs import PublisherConfig
from sendonce_contract.outcome_events import OutcomeEvent, transitions
from sendonce_contract.schema import Metric

from .shell import JsonLog, Once

PUT_EVENTS_BATCH = 10  # PutEvents takes at most ten entries
PUBLISH_TRIES = 3


PublisherSettings = PublisherConfig  # the publisher's environment


class OutcomePublisher:
    def __init__(self, settings: PublisherSettings, events: Any, log: TextIO | None = None,
                 sleep: Any = time.sleep) -> None:
        self.settings = settings
        self._events = events
        self._log = JsonLog(log, settings.pipeline_name)
        self._sleep = sleep

    def handle(self, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
        records = event.get("Records", [])
        pending = [(r["dynamodb"]["SequenceNumber"], e) for r in records for e in self.outcomes(r)]
        failed = self._publish(pending)
        published = len(pending) - len(failed)
        counts = {Metric.OUTCOME_EVENTS: published, Metric.OUTCOME_EVENTS_FAILED: len(failed)}
        nonzero = {name: count for name, count in counts.items() if count}
        self._log.write({"level": "WARN" if failed else "INFO", "logger": "sendonce.outcomes",
                         "outcome": "publish_failed" if failed else "published", "records": len(records),
                         "published": published, "failed": len(failed),
                         "transitions": sorted({e.outcome.transition for _, e in pending})},
                        list(nonzero), values=nonzero)
        # The stream retries from the first failed record, so every later transition is published again too:
        # in order, at least once, with the same event ids.
        first = min((sequence for sequence, _ in failed), key=int, default=None)
        return {"batchItemFailures": [] if first is None else [{"itemIdentifier": first}]}

    def outcomes(self, record: dict[str, Any]) -> list[OutcomeEvent]:
        """The outcome events one stream record carries."""
        images = record.get("dynamodb", {})
        return transitions(images.get("OldImage"), images.get("NewImage"), self.settings.pipeline_tag)

    def _publish(self, pending: list[tuple[str, OutcomeEvent]]) -> list[tuple[str, OutcomeEvent]]:
        """What could not be published after the tries."""
        failed: list[tuple[str, OutcomeEvent]] = []
        for start in range(0, len(pending), PUT_EVENTS_BATCH):
            chunk = pending[start : start + PUT_EVENTS_BATCH]
            for attempt in range(PUBLISH_TRIES):
                chunk = self._put(chunk)
                if not chunk:
                    break
                self._sleep(0.1 * 2**attempt)
            failed += chunk
        return failed

    def _put(self, chunk: list[tuple[str, OutcomeEvent]]) -> list[tuple[str, OutcomeEvent]]:
        try:
            response = self._events.put_events(Entries=[e.entry(self.settings.bus) for _, e in chunk])
        except Exception:  # any failure of the call: the whole chunk is tried again
            return chunk
        results = response.get("Entries", [])
        return [item for item, result in zip(chunk, results, strict=False) if result.get("ErrorCode")] + \
            chunk[len(results):]


def _build() -> OutcomePublisher:
    from . import aws_clients

    return OutcomePublisher(PublisherConfig.from_env(), aws_clients.recorder_client("events"))


_publisher = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return _publisher.get().handle(event, context)
