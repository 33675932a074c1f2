"""Every warning the construct gives at synth, each declared once (``WARNINGS``): its id, the stable name an
``Acknowledgment`` uses (``Annotation::<id>``), when it is given, for the docs, and one function that finds its
cases and says each: what it costs and the fix. ``warn`` gives a pipeline's; the VPC's comes from an aspect that
looks at the subnets once the app is built (``network.VpcEgressCheck``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Validations
from constructs import IConstruct

from sendonce_contract.deploy_config import longest_carried_gap_s, woken_phase_span_s
from sendonce_contract.priority import Priority

from .props import PipelineProps, known, seconds
from .rules import LAMBDA_MAX_TIMEOUT_S, MIN_MAX_CONCURRENCY

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


def _vpc_without_egress_cases(subnets: Sequence[str] | None, has_endpoint: bool) -> Iterator[str]:
    if subnets is not None and not has_endpoint:
        yield _vpc_without_egress(subnets)


def _slow_instances(props: PipelineProps) -> Iterator[str]:
    rates = props.lane_rates
    # The job queue's lane: bulk's share and instances with urgent_lane, the whole pipeline's without.
    per_instance = known(rates.bulk_instance_rate if rates is not None else props.max_send_rate)
    if per_instance is not None and per_instance < 1:
        yield _slow_instances_text(known(props.send_rate), props.max_concurrency, per_instance)


def _idle_instances(props: PipelineProps) -> Iterator[str]:
    rates = props.lane_rates
    instances = rates.bulk_max_concurrency if rates is not None else props.paced_concurrency
    send_rate, timeout_s = known(props.send_rate), seconds(props.function_timeout)
    if (instances is not None and props.max_concurrency is not None and instances < props.max_concurrency
            and send_rate is not None and timeout_s is not None):
        yield _idle_instances_text(send_rate, props.max_concurrency, timeout_s, instances,
                                   rates.bulk_rate if rates else None)


def _long_gaps(props: PipelineProps) -> Iterator[str]:
    timeout_s = seconds(props.function_timeout)
    if timeout_s is None:
        return
    for lane, lane_rate, lane_instances, lane_per_instance in _lane_paces(props):
        if 1 / lane_per_instance > longest_carried_gap_s(timeout_s) + 1e-9:
            yield _long_gap_text(lane, lane_rate, lane_instances, lane_per_instance, known(props.send_rate),
                                 timeout_s)


def _lane_paces(props: PipelineProps) -> list[tuple[str, float | None, int | None, float]]:
    """Each paced lane as it runs: (its name, "" without lanes; its own rate; its instances; each one's rate, a
    bulk instance's without the loan)."""
    rates = props.lane_rates
    if rates is None:
        per_instance = known(props.max_send_rate)
        return [] if per_instance is None else [("", known(props.send_rate), props.paced_concurrency, per_instance)]
    return [(lane.value, lane_rate, instances, per_instance) for lane, lane_rate, instances, per_instance in (
        (Priority.BULK, rates.bulk_rate, rates.bulk_max_concurrency, rates.bulk_instance_rate),
        (Priority.URGENT, rates.urgent_rate, rates.urgent_max_concurrency, rates.urgent_instance_rate),
    ) if per_instance is not None]


def _vpc_without_egress(subnets: Sequence[str]) -> str:
    """The warning for functions placed in subnets with no route out and no VPC endpoint in the VPC."""
    return (f"vpc_subnets select {', '.join(subnets) or 'no subnet'} with no route to the internet (isolated or "
            "public subnets: a function gets no public address) and the VPC has no endpoint: every call to "
            "DynamoDB, SQS and SES (and Secrets Manager with key_privacy) would time out and no email would be sent; "
            "select PRIVATE_WITH_EGRESS subnets, or add VPC endpoints (a DynamoDB gateway endpoint, SQS, SES and "
            "Secrets Manager interface endpoints), or acknowledge this warning if routes are made outside this app")


def _slow_instances_text(send_rate: float | None, max_concurrency: int | None, per_instance: float) -> str:
    """The warning for instances paced below one email a second (``max_concurrency`` above ``send_rate``, or a
    ``max_send_rate`` below one): what it costs and the fix."""
    cause = (f"max_concurrency ({max_concurrency}) is above send_rate ({send_rate:g}), so each instance the event "
             f"source runs sends {per_instance:.3g} emails/s" if send_rate is not None and max_concurrency is not None
             else f"max_send_rate ({per_instance:g}) is below one email a second an instance")
    if send_rate is None:
        fix = "raise max_send_rate to 1 or more with fewer instances"
    elif send_rate >= MIN_MAX_CONCURRENCY:  # the event source's least instances, at 1/s each or more
        fix = f"set max_concurrency to at most {math.floor(send_rate)}"
    else:
        fix = (f"a send_rate of {MIN_MAX_CONCURRENCY} or more (the event source runs {MIN_MAX_CONCURRENCY} "
               "instances at least)")
    return (f"{cause}: an instance's cadence after idling takes a random phase of up to "
            f"{woken_phase_span_s(per_instance):.3g} s (its first send within what it may wait), so that instances "
            "waking together spread over the pipeline's rate, and a paced pipeline sends no faster for more instances "
            f"(under a backlog each instance's jobs cost more SQS requests; docs: sending rate); {fix}, or "
            "acknowledge this warning")


def _idle_instances_text(send_rate: float, max_concurrency: int, function_timeout_s: float, instances: int,
                           bulk_rate: float | None) -> str:
    """The warning for a paced lane's event source run with fewer instances than ``max_concurrency``: more than
    its rate (``bulk_rate`` with urgent_lane, else ``send_rate``) keeps busy with this function timeout
    (``lane_rates.carried_instances``)."""
    lane = (f"send_rate ({send_rate:g}/s)" if bulk_rate is None
            else f"the bulk lane's share of send_rate ({bulk_rate:g} of {send_rate:g}/s)")
    gap_s = longest_carried_gap_s(function_timeout_s)
    return (f"max_concurrency ({max_concurrency}) is more instances than {lane} keeps busy "
            f"with a {function_timeout_s:g} s function_timeout: an instance's invocations carry at most "
            f"{gap_s:.3g} s between its sends, and each of {max_concurrency} would be handed a job about every "
            "invocation for fewer send slots, putting the rest back as delayed copies (SQS requests for no email; "
            f"docs: sending rate); so its event source runs at most {instances} instances; set max_concurrency to "
            f"at most {instances}, or raise function_timeout, or acknowledge this warning")


def _long_gap_text(lane: str, lane_rate: float | None, instances: int | None, per_instance: float,
                     send_rate: float | None, function_timeout_s: float) -> str:
    """The warning for a lane (``lane``: "bulk", "urgent", or "" without lanes) whose instances, as they run,
    each send less often than their invocations carry (``longest_carried_gap_s``): what sets their pace, and the
    fixes."""
    if not lane and send_rate is None:
        pace = f"max_send_rate ({per_instance:g})"
        fix = "give send_rate (the pipeline's rate) instead, and the construct runs as many instances as it keeps busy"
    elif not lane:
        pace = f"send_rate ({send_rate:g}/s) over the event source's minimum of two instances"
        fix = "a higher send_rate"
    else:
        pace = (f"the {lane} lane's share of send_rate ({lane_rate:g} of {send_rate:g}/s) over its {instances} "
                "instances")
        fix = f"a higher send_rate or a {'larger' if lane == 'urgent' else 'smaller'} urgent_share"
    gap_s = 1 / per_instance
    timeout_s = next((t for t in range(1, LAMBDA_MAX_TIMEOUT_S + 1) if longest_carried_gap_s(t) >= gap_s - 1e-9),
                     None)
    timeout_fix = (f"a function_timeout of at least {timeout_s} s" if timeout_s is not None
                   else "a higher rate (no function timeout carries it)")
    return (f"{pace} is {per_instance:.3g} emails/s an instance, a send every {gap_s:.3g} s, longer than a "
            f"{function_timeout_s:g} s function_timeout's invocations carry between an instance's sends "
            f"({longest_carried_gap_s(function_timeout_s):.3g} s): under a backlog about every other job would go "
            f"back as a delayed copy (SQS requests for no email; docs: sending rate); {fix}, or {timeout_fix}, or "
            "acknowledge this warning")


LOW_MAX_RECEIVE_COUNT = SynthWarning("maxReceiveCountBelowFive", "`max_receive_count` below 5",
                                     _low_max_receive_count)
OUTCOME_EVENTS_SKIPPED = SynthWarning("outcomeEventsNeedATableStream",
                                      "`existing_table` without a stream: outcome events are off",
                                      _outcome_events_skipped)
VPC_WITHOUT_EGRESS = SynthWarning("vpcSubnetsWithoutEgress",
                                  "functions in subnets with no route out, in a VPC with no endpoint",
                                  _vpc_without_egress_cases)
SLOW_INSTANCES = SynthWarning("maxConcurrencyAboveSendRate",
                              "`max_concurrency` above `send_rate` (or `max_send_rate` below 1): first sends after "
                              "idling wait a random phase", _slow_instances)
IDLE_INSTANCES = SynthWarning("maxConcurrencyLoweredToThePace",
                              "`max_concurrency` above what `send_rate` keeps busy with `function_timeout` (a gap "
                              "between an instance's sends longer than its invocations carry): the event source "
                              "runs fewer instances", _idle_instances)
LONG_GAP = SynthWarning("sendGapLongerThanTheFunctionCarries",
                        "a lane's instances, as they run, each send less often than a `function_timeout`'s "
                        "invocations carry (`max_send_rate`, or the event source's minimum of two)", _long_gaps)

# Every warning, in the docs' order; those of the props, given by ``warn`` in this order.
WARNINGS = (LOW_MAX_RECEIVE_COUNT, OUTCOME_EVENTS_SKIPPED, VPC_WITHOUT_EGRESS, SLOW_INSTANCES, IDLE_INSTANCES,
            LONG_GAP)
PROPS_WARNINGS = (SLOW_INSTANCES, IDLE_INSTANCES, LONG_GAP, LOW_MAX_RECEIVE_COUNT, OUTCOME_EVENTS_SKIPPED)


def warn(scope: IConstruct, props: PipelineProps) -> None:
    """Every warning the pipeline's props call for."""
    for warning in PROPS_WARNINGS:
        warning.give(scope, props)
