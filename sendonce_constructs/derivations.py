"""The defaults computed from other props, and the facts the rules and the builders need besides the props: one
small function each, named for what it computes.

Each is a plain function of the props as they will be built (``PipelineProps``: given, or their declared default),
read by name, as the constructor reads them; ``p.given`` names the props given. A derived prop's declaration names
its derivation (``queue_props``), which runs only when the prop is not given; its return type is the type the prop is
built with (``resolved_props`` is rendered from it). Derived props are computed in the order they are declared, and
read only props that are not derived and derived props declared before them (reading one not computed yet fails,
``props.resolve_props``); the facts, in ``FACTS``' order, after every prop.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs

from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S, DEFAULT_EVIDENCE_GRACE_S
from sendonce_contract.sqs_limits import minimum_visibility_timeout_s

from .lane_rates import LaneRates, instance_rate, paced_batch_size, paced_cap, split
from .readings import read, read_seconds
from .rules import (
    RECOMMENDED_MAX_RECEIVE_COUNT,
    UNBATCHED_MAX_BATCH,
    attachment_lifetime_days,
    attachment_lifetime_text,
    outbox_minimum_dedupe_ttl_s,
)
from .unresolved import UNRESOLVED, SynthPython, Unresolved, is_known

if TYPE_CHECKING:
    from .resolved_props import PipelineProps

DAY_S = 86_400


def runtime(p: PipelineProps) -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib knows (``newest_python_runtime``)."""
    return newest_python_runtime()


def newest_python_runtime() -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib knows (what cdk-nag's AwsSolutions-L1 asks for)."""
    versions = [
        (tuple(int(part) for part in name.split("_")[1:]), name)
        for name in dir(lambda_.Runtime)
        if re.fullmatch(r"PYTHON_3_\d+", name)
    ]
    newest: lambda_.Runtime = getattr(lambda_.Runtime, max(versions)[1])
    return newest


def visibility_timeout(p: PipelineProps) -> Duration | None:
    """The shortest the rule allows; None when the function timeout or the window is a token: the queue's own
    default then."""
    timeout_s = read_seconds(p.function_timeout)
    window_s = read_seconds(p.max_batching_window) if p.max_batching_window is not None else 0.0
    if not (is_known(timeout_s) and is_known(window_s)):
        return None
    return Duration.seconds(minimum_visibility_timeout_s(timeout_s, window_s))


def dedupe_ttl(p: PipelineProps) -> Duration:
    """7 days; with an outbox the key must outlive the stream, the queue and the DLQ: whole days, at least 7."""
    retention_s = read_seconds(p.retention_period)
    if p.outbox and is_known(retention_s):
        minimum_s = outbox_minimum_dedupe_ttl_s(retention_s)
        return Duration.days(max(DEFAULT_DEDUPE_TTL_S // DAY_S, -(-int(minimum_s) // DAY_S)))
    return Duration.seconds(DEFAULT_DEDUPE_TTL_S)


def batch_size(p: PipelineProps) -> int:
    """What one instance sends in one invocation at its pace (``lane_rates.paced_batch_size``): 10 unpaced."""
    return paced_batch_size(p.function_timeout, p.max_send_rate)


def parallelism(p: PipelineProps) -> int | None:
    """The batch size, at most 10; None when the batch size is a token."""
    return min(p.batch_size, UNBATCHED_MAX_BATCH) if is_known(read(p.batch_size)) else None


def encryption(p: PipelineProps) -> sqs.QueueEncryption:
    return sqs.QueueEncryption.KMS if p.encryption_key is not None else sqs.QueueEncryption.SQS_MANAGED


def evidence_grace_period(p: PipelineProps) -> Duration | None:
    return Duration.seconds(DEFAULT_EVIDENCE_GRACE_S) if p.ses_events else None


def max_send_rate(p: PipelineProps) -> float | None:
    """Each instance's share of the pipeline's ``send_rate`` (``lane_rates.instance_rate``)."""
    return instance_rate(p.send_rate, p.max_concurrency)


def lane_rates(p: PipelineProps) -> LaneRates | None:
    """With ``urgent_lane``: each lane's concurrency and per-instance rates (``lane_rates``); rates None when the
    send rate, the concurrency or the share is a token or absent."""
    if not p.urgent_lane:
        return None
    max_concurrency = p.max_concurrency
    rate, instances, share = read(p.send_rate), read(max_concurrency), read(p.urgent_share)
    # A cap that is a token caps both lanes as given, unpaced (a send rate needs a known cap).
    known_rate = rate if is_known(rate) and is_known(share) and is_known(instances) else None
    cap = int(instances) if is_known(instances) else max_concurrency
    return split(known_rate, cap, share if is_known(share) and share is not None else 0.0)


def paced_concurrency(p: PipelineProps) -> int | None:
    """The job queue's event source's maximum concurrency (``lane_rates.paced_cap``): ``max_concurrency``, or fewer
    with ``send_rate`` (synth warns, ``maxConcurrencyLoweredToThePace``)."""
    return paced_cap(p.send_rate, p.max_concurrency)


def waiting_room(p: PipelineProps) -> bool:
    """On for a standard queue; a FIFO queue refuses sendAt, and its parked jobs wait in their group."""
    return not p.fifo


def outcome_events(p: PipelineProps) -> bool:
    """On, unless an existing table has no stream to read them from (then off, with a warning)."""
    return p.existing_table is None or p.existing_table.table_stream_arn is not None


# The facts: not props, but what the rules read and the builders use besides them.

def sender_name(p: PipelineProps) -> str | Unresolved:
    """The identity's name."""
    sender = p.sender
    name = read(sender if isinstance(sender, str) else sender.email_identity_name)
    assert name is not None
    return name


def synth_python(p: PipelineProps) -> SynthPython:
    """The Python running synth, and whether aws-cdk-lib has a Lambda runtime of it."""
    major, minor = sys.version_info[:2]
    return SynthPython((major, minor), hasattr(lambda_.Runtime, f"PYTHON_{major}_{minor}"))


def outcome_events_skipped(p: PipelineProps) -> bool:
    """Left off by default: the existing table has no stream (a warning says so)."""
    return "outcome_events" not in p.given and not p.outcome_events


def low_max_receive_count(p: PipelineProps) -> bool:
    """Below AWS's recommended 5 (and allowed): a warning the user may acknowledge."""
    count = read(p.max_receive_count)
    return is_known(count) and 1 <= count < RECOMMENDED_MAX_RECEIVE_COUNT


def attachments_expiry_days(p: PipelineProps) -> int | Unresolved | None:
    """The days an attachment must be kept: how long after its upload its job can still be sent
    (``rules.attachment_lifetime_terms``), in whole days; None without an attachments bucket, ``UNRESOLVED`` when
    retention_period or dedupe_ttl is a token."""
    if p.attachments_bucket is False:
        return None
    retention_s, dedupe_ttl_s = read_seconds(p.retention_period), read_seconds(p.dedupe_ttl)
    if not (is_known(retention_s) and is_known(dedupe_ttl_s)):
        return UNRESOLVED
    return attachment_lifetime_days(retention_s, dedupe_ttl_s, p.fifo, p.outbox)


def attachments_lifetime(p: PipelineProps) -> str | None:
    """The terms of ``attachments_expiry_days`` in words, for the rules' messages; None when it has none."""
    retention_s, dedupe_ttl_s = read_seconds(p.retention_period), read_seconds(p.dedupe_ttl)
    if p.attachments_bucket is False or not (is_known(retention_s) and is_known(dedupe_ttl_s)):
        return None
    return attachment_lifetime_text(retention_s, dedupe_ttl_s, p.fifo, p.outbox)


# In the order they are computed: a fact may read a derived prop.
FACTS: tuple[Callable[[PipelineProps], object], ...] = (
    sender_name, synth_python, outcome_events_skipped, low_max_receive_count, lane_rates, paced_concurrency,
    attachments_expiry_days, attachments_lifetime)
