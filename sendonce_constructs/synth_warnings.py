"""Every warning the construct gives at synth, each declared once (``WARNINGS``): its id, the stable name an
``Acknowledgment`` uses (``Annotation::<id>``), when it is given, for the docs, and one function that finds its
cases and says each: what it costs and the fix. ``warn`` gives a pipeline's; the VPC's comes from an aspect that
looks at the subnets once the app is built (``network.VpcEgressCheck``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Validations
from constructs import IConstruct

from .props import PipelineProps, known
from .rules import MIN_MAX_CONCURRENCY

ID_PREFIX = "@sendonce/SendOnceEmailQueue:"


@dataclass(frozen=True)
class SynthWarning:
    """One warning: ``says`` yields its text for each case it finds in what it is given (nothing: no warning)."""

    name: str
    when: str
    says: Callable[..., Iterator[str]]

    @property
    def id(self) -> str:
        return ID_PREFIX + self.name

    def give(self, scope: IConstruct, *facts: Any) -> None:
        for text in self.says(*facts):
            Validations.of(scope).add_warning(self.id, text)


def _low_max_receive_count(props: PipelineProps) -> Iterator[str]:
    if props.low_max_receive_count:
        yield (f"max_receive_count ({props.max_receive_count}) is below 5: a message throttled or briefly in flight "
               "elsewhere a few times lands in the dead-letter queue unsent; AWS recommends 5 or more")


def _outcome_events_skipped(props: PipelineProps) -> Iterator[str]:
    if props.outcome_events_skipped:
        yield ("outcome_events are off: existing_table has no stream to read them from; enable a stream with "
               "NEW_AND_OLD_IMAGES (and pass its stream ARN) to hear each email's fate, or set outcome_events=False")


def _max_send_rate_deprecated(props: PipelineProps) -> Iterator[str]:
    if "max_send_rate" not in props.given:
        return
    rate, cap = known(props.max_send_rate), known(props.max_concurrency)
    instead = (f"send_rate={rate * cap:g} with max_concurrency={cap:g}" if rate is not None and cap is not None
               else "send_rate (the pipeline's rate) with a max_concurrency")
    yield (f"max_send_rate is deprecated: it says the rate a second time, per instance, where send_rate says it once "
           f"for the pipeline and the construct divides it over the instances that run; give {instead} (the same "
           "pace each instance at one email a second or more; below that, fewer instances each faster, as the "
           "construct runs a slow send_rate; without a cap on concurrency no per-instance rate bounds the "
           "pipeline's), and drop max_send_rate; it keeps working until the next major version")


def _vpc_without_egress_cases(subnets: Sequence[str] | None, has_endpoint: bool) -> Iterator[str]:
    if subnets is not None and not has_endpoint:
        yield _vpc_without_egress(subnets)


def _slow_instances(props: PipelineProps) -> Iterator[str]:
    rates = props.lane_rates
    # The job queue's lane: bulk's share and instances with urgent_lane, the whole pipeline's without.
    per_instance = known(rates.bulk_instance_rate if rates is not None else props.max_send_rate)
    if per_instance is not None and per_instance < 1:
        yield _slow_instances_text(known(props.send_rate), per_instance)


def _idle_instances(props: PipelineProps) -> Iterator[str]:
    rates = props.lane_rates
    instances = rates.bulk_max_concurrency if rates is not None else props.paced_concurrency
    send_rate = known(props.send_rate)
    if (instances is not None and props.max_concurrency is not None and instances < props.max_concurrency
            and send_rate is not None):
        yield _idle_instances_text(send_rate, props.max_concurrency, instances, rates.bulk_rate if rates else None)


def _vpc_without_egress(subnets: Sequence[str]) -> str:
    """The warning for functions placed in subnets with no route out and no VPC endpoint in the VPC."""
    return (f"vpc_subnets select {', '.join(subnets) or 'no subnet'} with no route to the internet (isolated or "
            "public subnets: a function gets no public address) and the VPC has no endpoint: every call to "
            "DynamoDB, SQS and SES (and Secrets Manager with key_privacy) would time out and no email would be sent; "
            "select PRIVATE_WITH_EGRESS subnets, or add VPC endpoints (a DynamoDB gateway endpoint, SQS, SES and "
            "Secrets Manager interface endpoints), or acknowledge this warning if routes are made outside this app")


def _slow_instances_text(send_rate: float | None, per_instance: float) -> str:
    """The warning for instances paced below one email a second (a ``send_rate`` below the event source's two
    instances at one a second, or a ``max_send_rate`` below one): what it costs and the fix."""
    cause = (f"send_rate ({send_rate:g}) over the event source's minimum of {MIN_MAX_CONCURRENCY} instances is "
             f"{per_instance:.3g} emails/s an instance" if send_rate is not None
             else f"max_send_rate ({per_instance:g}) is below one email a second an instance")
    fix = ("raise max_send_rate to 1 or more with fewer instances" if send_rate is None
           else f"a send_rate of {MIN_MAX_CONCURRENCY} or more")
    return (f"{cause}: each instance's bucket still holds one token, so the instances may send together faster "
            f"than the rate for a moment (SES throttles the excess, which goes back as a delayed copy), and a job "
            f"may wait up to {1 / per_instance:.3g} s for its instance's next token (docs: sending rate); {fix}, or "
            "acknowledge this warning")


def _idle_instances_text(send_rate: float, max_concurrency: int, instances: int, bulk_rate: float | None) -> str:
    """The warning for a paced lane's event source run with fewer instances than ``max_concurrency``: no more
    than its rate (``bulk_rate`` with urgent_lane, else ``send_rate``) in emails a second
    (``lane_rates.paced_instances``)."""
    lane = (f"send_rate ({send_rate:g}/s)" if bulk_rate is None
            else f"the bulk lane's share of send_rate ({bulk_rate:g} of {send_rate:g}/s)")
    return (f"max_concurrency ({max_concurrency}) is more instances than {lane} gives one email a second each: "
            "an instance paced slower waits longer between sends, and a job received waits for its instance's "
            f"token while others idle (docs: sending rate); so its event source runs at most {instances} "
            f"instances; set max_concurrency to at most {instances}, or acknowledge this warning")


LOW_MAX_RECEIVE_COUNT = SynthWarning("maxReceiveCountBelowFive", "`max_receive_count` below 5",
                                     _low_max_receive_count)
OUTCOME_EVENTS_SKIPPED = SynthWarning("outcomeEventsNeedATableStream",
                                      "`existing_table` without a stream: outcome events are off",
                                      _outcome_events_skipped)
VPC_WITHOUT_EGRESS = SynthWarning("vpcSubnetsWithoutEgress",
                                  "functions in subnets with no route out, in a VPC with no endpoint",
                                  _vpc_without_egress_cases)
SLOW_INSTANCES = SynthWarning("maxConcurrencyAboveSendRate",
                              "each instance paced below one email a second (`send_rate` below 2, or "
                              "`max_send_rate` below 1)", _slow_instances)
IDLE_INSTANCES = SynthWarning("maxConcurrencyLoweredToThePace",
                              "`max_concurrency` above what `send_rate` gives one email a second each: the event "
                              "source runs fewer instances", _idle_instances)
MAX_SEND_RATE_DEPRECATED = SynthWarning("maxSendRateDeprecated", "`max_send_rate` given: give `send_rate` instead",
                                        _max_send_rate_deprecated)

# Every warning, in the docs' order; those of the props, given by ``warn`` in this order.
WARNINGS = (LOW_MAX_RECEIVE_COUNT, OUTCOME_EVENTS_SKIPPED, VPC_WITHOUT_EGRESS, SLOW_INSTANCES, IDLE_INSTANCES,
            MAX_SEND_RATE_DEPRECATED)
PROPS_WARNINGS = (MAX_SEND_RATE_DEPRECATED, SLOW_INSTANCES, IDLE_INSTANCES, LOW_MAX_RECEIVE_COUNT,
                  OUTCOME_EVENTS_SKIPPED)


def warn(scope: IConstruct, props: PipelineProps) -> None:
    """Every warning the pipeline's props call for."""
    for warning in PROPS_WARNINGS:
        warning.give(scope, props)
