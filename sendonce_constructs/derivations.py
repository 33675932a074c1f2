"""The defaults computed from other props, and the facts the rules and the builders need besides the props: one
small function each, named for what it computes.

A derivation's parameters name what it reads, and it is called with exactly those, as a rule is (``rules``): a
parameter named for a prop gets the prop's value as it will be built (given, or its declared default), one named
``<prop>_given`` the value given (None when absent). A derived prop's declaration names its derivation
(``queue_props``), which runs only when the prop is not given; its return type is the type the prop is built with
(``resolved_props`` is rendered from it). Derived props are computed in the order they are declared, and read only
props that are not derived, props as given, and derived props declared before them.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sqs as sqs

from sendonce_contract.deploy_config import sends_per_invocation
from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S, DEFAULT_EVIDENCE_GRACE_S
from sendonce_contract.sqs_limits import minimum_visibility_timeout_s

from .lane_rates import LaneRates, paced_instances, split
from .readings import read, read_seconds
from .rules import (
    RECOMMENDED_MAX_RECEIVE_COUNT,
    UNBATCHED_MAX_BATCH,
    attachment_lifetime_days,
    attachment_lifetime_text,
    outbox_minimum_dedupe_ttl_s,
)
from .unresolved import UNRESOLVED, SynthPython, Unresolved, is_known

DAY_S = 86_400


def runtime() -> lambda_.Runtime:
    """The newest Python runtime this aws-cdk-lib knows (what cdk-nag's AwsSolutions-L1 asks for)."""
    versions = [
        (tuple(int(part) for part in name.split("_")[1:]), name)
        for name in dir(lambda_.Runtime)
        if re.fullmatch(r"PYTHON_3_\d+", name)
    ]
    newest: lambda_.Runtime = getattr(lambda_.Runtime, max(versions)[1])
    return newest


def visibility_timeout(function_timeout: Duration, max_batching_window: Duration | None) -> Duration | None:
    """The shortest the rule allows; None when the function timeout or the window is a token: the queue's own
    default then."""
    timeout_s = read_seconds(function_timeout)
    window_s = read_seconds(max_batching_window) if max_batching_window is not None else 0.0
    if not (is_known(timeout_s) and is_known(window_s)):
        return None
    return Duration.seconds(minimum_visibility_timeout_s(timeout_s, window_s))


def dedupe_ttl(outbox: bool, retention_period: Duration) -> Duration:
    """7 days; with an outbox the key must outlive the stream, the queue and the DLQ: whole days, at least 7."""
    retention_s = read_seconds(retention_period)
    if outbox and is_known(retention_s):
        minimum_s = outbox_minimum_dedupe_ttl_s(retention_s)
        return Duration.days(max(DEFAULT_DEDUPE_TTL_S // DAY_S, -(-int(minimum_s) // DAY_S)))
    return Duration.seconds(DEFAULT_DEDUPE_TTL_S)


def batch_size(function_timeout: Duration, send_rate: float | None, max_concurrency: int | None,
               max_send_rate_given: float | None) -> int:
    """10; with pacing, what one instance can send in one invocation at its share of the rate, at most 10
    (``sends_per_invocation``): a larger batch is received only for its tail to be put back, again and again."""
    rate = (read(max_send_rate_given) if max_send_rate_given is not None
            else max_send_rate(send_rate, max_concurrency))
    timeout_s = read_seconds(function_timeout)
    if rate is None or not (is_known(rate) and is_known(timeout_s)):
        return UNBATCHED_MAX_BATCH
    return min(UNBATCHED_MAX_BATCH, sends_per_invocation(float(rate), timeout_s))


def parallelism(batch_size: int) -> int | None:
    """The batch size, at most 10; None when the batch size is a token."""
    return min(batch_size, UNBATCHED_MAX_BATCH) if is_known(read(batch_size)) else None


def encryption(encryption_key: kms.IKey | None) -> sqs.QueueEncryption:
    return sqs.QueueEncryption.KMS if encryption_key is not None else sqs.QueueEncryption.SQS_MANAGED


def evidence_grace_period(ses_events: bool) -> Duration | None:
    return Duration.seconds(DEFAULT_EVIDENCE_GRACE_S) if ses_events else None


def max_send_rate(send_rate: float | None, max_concurrency: int | None) -> float | None:
    """Each instance's share of the pipeline's ``send_rate``, over the instances that run (``paced_concurrency``)."""
    rate, instances = read(send_rate), paced_concurrency(send_rate, max_concurrency)
    return rate / instances if is_known(rate) and instances is not None else None


def lane_rates(urgent_lane: bool, send_rate: float | None, max_concurrency: int | None,
               urgent_share: float | None) -> LaneRates | None:
    """With ``urgent_lane``: each lane's concurrency and per-instance rates (``lane_rates``); rates None when the
    send rate, the concurrency or the share is a token or absent."""
    if not urgent_lane:
        return None
    rate, instances, share = read(send_rate), read(max_concurrency), read(urgent_share)
    # A cap that is a token caps both lanes as given, unpaced (a send rate needs a known cap).
    known_rate = rate if is_known(rate) and is_known(share) and is_known(instances) else None
    cap = int(instances) if is_known(instances) else max_concurrency
    return split(known_rate, cap, share if is_known(share) and share is not None else 0.0)


def paced_concurrency(send_rate: float | None, max_concurrency: int | None) -> int | None:
    """The job queue's event source's maximum concurrency: ``max_concurrency``, or fewer with ``send_rate``, so
    each instance paces at one email a second or more (``lane_rates.paced_instances``; synth warns,
    ``maxConcurrencyLoweredToThePace``); None without a cap; a cap that is a token, as given (a send rate needs a
    known one: ``rules.check_send_rate``)."""
    rate, instances = read(send_rate), read(max_concurrency)
    if max_concurrency is None or not is_known(instances) or rate is None or not is_known(rate):
        return max_concurrency
    return paced_instances(float(rate), int(max_concurrency))


def waiting_room(fifo: bool) -> bool:
    """On for a standard queue; a FIFO queue refuses sendAt, and its parked jobs wait in their group."""
    return not fifo


def outcome_events(existing_table: dynamodb.ITable | None) -> bool:
    """On, unless an existing table has no stream to read them from (then off, with a warning)."""
    return existing_table is None or existing_table.table_stream_arn is not None


# The facts: not props, but what the rules read and the builders use besides them.

def sender_name(sender: str | ses.IEmailIdentity) -> str | Unresolved:
    """The identity's name."""
    name = read(sender if isinstance(sender, str) else sender.email_identity_name)
    assert name is not None
    return name


def synth_python() -> SynthPython:
    """The Python running synth, and whether aws-cdk-lib has a Lambda runtime of it."""
    major, minor = sys.version_info[:2]
    return SynthPython((major, minor), hasattr(lambda_.Runtime, f"PYTHON_{major}_{minor}"))


def outcome_events_skipped(outcome_events: bool, outcome_events_given: bool | None) -> bool:
    """Left off by default: the existing table has no stream (a warning says so)."""
    return outcome_events_given is None and not outcome_events


def low_max_receive_count(max_receive_count: int) -> bool:
    """Below AWS's recommended 5 (and allowed): a warning the user may acknowledge."""
    count = read(max_receive_count)
    return is_known(count) and 1 <= count < RECOMMENDED_MAX_RECEIVE_COUNT


def attachments_expiry_days(attachments_bucket: bool | s3.IBucket, retention_period: Duration, dedupe_ttl: Duration,
                            fifo: bool, outbox: bool) -> int | Unresolved | None:
    """The days an attachment must be kept: how long after its upload its job can still be sent
    (``rules.attachment_lifetime_terms``), in whole days; None without an attachments bucket, ``UNRESOLVED`` when
    retention_period or dedupe_ttl is a token."""
    if attachments_bucket is False:
        return None
    retention_s, dedupe_ttl_s = read_seconds(retention_period), read_seconds(dedupe_ttl)
    if not (is_known(retention_s) and is_known(dedupe_ttl_s)):
        return UNRESOLVED
    return attachment_lifetime_days(retention_s, dedupe_ttl_s, fifo, outbox)


def attachments_lifetime(attachments_bucket: bool | s3.IBucket, retention_period: Duration, dedupe_ttl: Duration,
                         fifo: bool, outbox: bool) -> str | None:
    """The terms of ``attachments_expiry_days`` in words, for the rules' messages; None when it has none."""
    retention_s, dedupe_ttl_s = read_seconds(retention_period), read_seconds(dedupe_ttl)
    if attachments_bucket is False or not (is_known(retention_s) and is_known(dedupe_ttl_s)):
        return None
    return attachment_lifetime_text(retention_s, dedupe_ttl_s, fifo, outbox)


# In the order they are computed: a fact may read a derived prop.
FACTS: tuple[Callable[..., object], ...] = (sender_name, synth_python, outcome_events_skipped, low_max_receive_count,
                                            lane_rates, paced_concurrency, attachments_expiry_days,
                                            attachments_lifetime)
