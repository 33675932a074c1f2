"""How a pipeline with ``urgent_lane`` splits its ``send_rate`` between its two lanes, computed once at synth.

The urgent lane has its own consumer function and event source: its ``urgent_max_concurrency`` instances pace at
``urgent_instance_rate`` each, so the urgent lane sends at most ``urgent_share`` x ``send_rate``, and always may.
Each of bulk's ``max_concurrency`` instances paces at ``bulk_instance_rate`` (its lane's share), plus
``lent_instance_rate`` while the urgent lane is idle (``sendonce_runtime.lane_share``): the urgent lane's share,
lent. The sums: urgent at most share x rate, bulk at most (1 - share) x rate while urgent has work, rate while not.

A paced lane runs no more instances than its rate in emails a second (``paced_instances``), two at least (the event
source's minimum): each instance's share is one email a second or more where the rate allows, so its bucket's one
token is a second's worth, and no instance waits long between sends for jobs it was handed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from aws_cdk import Duration

from sendonce_contract.deploy_config import sends_per_invocation

from .readings import read, read_seconds
from .rules import MIN_MAX_CONCURRENCY, UNBATCHED_MAX_BATCH
from .unresolved import is_known


class LaneRates(NamedTuple):
    """The lanes' concurrency and per-instance rates (recipients a second); rates are None without a send rate."""

    urgent_max_concurrency: int | None
    bulk_max_concurrency: int | None
    urgent_instance_rate: float | None = None
    bulk_instance_rate: float | None = None
    lent_instance_rate: float | None = None

    @property
    def bulk_rate(self) -> float | None:
        """The bulk lane's own share of the rate, all its instances together (without the loan)."""
        return _lane_rate(self.bulk_instance_rate, self.bulk_max_concurrency)

    @property
    def urgent_rate(self) -> float | None:
        return _lane_rate(self.urgent_instance_rate, self.urgent_max_concurrency)


def _lane_rate(instance_rate: float | None, instances: int | None) -> float | None:
    return instance_rate * instances if instance_rate is not None and instances is not None else None


def paced_instances(lane_rate: float, max_concurrency: int) -> int:
    """How many of a paced lane's ``max_concurrency`` instances run: no more than its rate in emails a second, so
    each paces at one a second or more, and two at least (the event source's minimum)."""
    return min(max_concurrency, max(MIN_MAX_CONCURRENCY, math.floor(lane_rate + 1e-9)))


def paced_cap(send_rate: float | None, max_concurrency: int | None) -> int | None:
    """A paced pipeline's event source's maximum concurrency: ``max_concurrency``, or fewer with ``send_rate``
    (``paced_instances``); None without a cap; a cap or a rate that is a token, the cap as given (a send rate needs
    a known cap: ``rules.check_send_rate``)."""
    rate, instances = read(send_rate), read(max_concurrency)
    if max_concurrency is None or not is_known(instances) or rate is None or not is_known(rate):
        return max_concurrency
    return paced_instances(float(rate), int(max_concurrency))


def instance_rate(send_rate: float | None, max_concurrency: int | None) -> float | None:
    """Each instance's share of the pipeline's ``send_rate``, over the instances that run (``paced_cap``); None
    without a rate or a known cap."""
    rate, instances = read(send_rate), paced_cap(send_rate, max_concurrency)
    return rate / instances if is_known(rate) and instances is not None else None


def paced_batch_size(function_timeout: Duration, instance_rate: float | None) -> int:
    """10 (SQS's most without a batching window); with pacing, what one instance can send in one invocation at its
    rate, at most 10 (``sends_per_invocation``): a larger batch is received only for its tail to be put back, again
    and again."""
    rate, timeout_s = read(instance_rate), read_seconds(function_timeout)
    if rate is None or not (is_known(rate) and is_known(timeout_s)):
        return UNBATCHED_MAX_BATCH
    return min(UNBATCHED_MAX_BATCH, sends_per_invocation(float(rate), timeout_s))


def split(send_rate: float | None, max_concurrency: int | None, urgent_share: float) -> LaneRates:
    """The split of ``send_rate`` over bulk's ``max_concurrency`` instances (``paced_instances`` of them) and the
    urgent lane's own: as few urgent instances as carry its share at bulk's per-instance pace or less, and no
    more than its rate in emails a second (two at least, the event source's minimum); without a send rate, the
    urgent lane has bulk's concurrency cap and neither lane is paced."""
    if send_rate is None or max_concurrency is None:
        return LaneRates(urgent_max_concurrency=max_concurrency, bulk_max_concurrency=max_concurrency)
    bulk_rate, urgent_rate = (1 - urgent_share) * send_rate, urgent_share * send_rate
    bulk_instances = paced_instances(bulk_rate, max_concurrency)
    urgent_instances = paced_instances(urgent_rate, max(MIN_MAX_CONCURRENCY, math.ceil(max_concurrency * urgent_share)))
    return LaneRates(
        urgent_max_concurrency=urgent_instances,
        bulk_max_concurrency=bulk_instances,
        urgent_instance_rate=urgent_rate / urgent_instances,
        bulk_instance_rate=bulk_rate / bulk_instances,
        lent_instance_rate=urgent_rate / bulk_instances,
    )


def lane_batch_size(batch_size: int, function_timeout: Duration, instance_rate: float | None) -> int | None:
    """The urgent lane's event source batch: ``batch_size``, or less when an urgent instance, at its own pace,
    sends fewer in one invocation (``sends_per_invocation``), as pacing derives the job queue's; None (the
    ``batch_size`` prop) when the pace, the timeout or the batch size is not known at synth."""
    timeout_s = read_seconds(function_timeout)
    given = read(batch_size)
    if instance_rate is None or not (is_known(timeout_s) and is_known(given)) or given is None:
        return None
    return min(int(given), sends_per_invocation(instance_rate, timeout_s))
