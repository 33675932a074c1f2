"""The run every burst scenario measures: jobs enqueued at once and drained by the event source while the
emulator's SES accepts R a second (emails or recipients), with Lambda's faults if the scenario plays them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from ...emulator.ses_limits import SES_RATE
from ...lambda_service.instances import FunctionSpec
from ...lambda_service.sqs_source import EventSourceRunner, EventSourceSpec, FaultPlan
from ..workload import enqueue


@dataclass(frozen=True)
class DrainedBurst:
    started: float  # monotonic seconds, when SES's limit went on and the pollers began to start
    drain_s: float
    drained: bool  # False: the bound passed first
    runner: dict[str, int]  # the event source's counts
    accepted_at: list[float]  # monotonic seconds of each send SES accepted
    recipients: list[int]  # recipients of each send SES accepted
    throttles: int

    @property
    def span_s(self) -> float:
        """From the first to the last send SES accepted."""
        return self.accepted_at[-1] - self.accepted_at[0] if len(self.accepted_at) > 1 else 0.0


def drain_burst(
    function: FunctionSpec, source: EventSourceSpec, environment: Mapping[str, str], sqs: Any, bodies: list[str],
    rate: float, log: IO[str] | None, bound_s: float, faults: FaultPlan | None = None,
    once_enqueued: Callable[[], None] = lambda: None,
) -> DrainedBurst:
    """Enqueue ``bodies`` at once while SES accepts ``rate`` a second, call ``once_enqueued``, and play the event
    source (with ``faults``) until the queue is empty or ``bound_s`` passed; SES's limit is lifted however the run
    ends."""
    SES_RATE.limit(rate)
    started = time.monotonic()
    try:
        with EventSourceRunner(function, source, environment, log, faults) as runner:
            enqueue(sqs, source.queue_url, bodies)
            once_enqueued()
            drained = runner.run_until_drained(bound_s)
            # Until the queue was found empty (the check that then confirmed it is the harness's, not the drain).
            drain_s = (runner.drained_at if runner.drained_at is not None else time.monotonic()) - started
        counts = runner.stats.as_dict()  # once stopped: the pollers' last (empty) receives are in it
    finally:
        accepted_at, recipients, throttles = list(SES_RATE.accepted_at), list(SES_RATE.recipients), SES_RATE.throttled
        SES_RATE.limit(None)
    return DrainedBurst(started, drain_s, drained, counts, accepted_at, recipients, throttles)


def queue_depth(sqs: Any, queue_url: str) -> int:
    """Messages in the queue, visible or in flight (as a dead-letter count before and after a burst)."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
    return sum(int(v) for v in attributes["Attributes"].values())
