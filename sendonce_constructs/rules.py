"""The synth-time rules that keep the pipeline's guarantees, one small function per rule, and their registry.

Each rule is a plain function of the props as the rules see them (``PropReadings``, read once by ``readings``): it
reads what it weighs from them by name, and ``props.resolve_props`` runs every rule of ``RULES`` in this file's
order. A value is in seconds for a duration, ``None`` for a prop not given (``PropReadings.given`` names the props
given, the others took their default or derivation), ``UNRESOLVED`` for a value that is an unresolved token (CDK
cannot know it at synth time, so the rule skips what needs it rather than guess), and plain facts (``TableFacts``...)
for the CDK objects a rule weighs; the facts ``derivations.FACTS`` finds are read the same way.
The props checked only against bounds are one table (``RANGES``), checked by one rule.
Each rule raises :class:`SendOnceConfigurationError` naming the prop, the value given, the rule and the fix.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from sendonce_contract.allowed_recipients import AllowedRecipients, InvalidEntry, parse_entries
from sendonce_contract.job_lifetime import (
    DAY_S,
    DEAD_LETTER_RETENTION_S,
    MAX_JOB_AGE_S,
    MIN_JOB_AGE_S,
    OUTBOX_STREAM_RETENTION_S,
    job_lifetime_s,
    job_lifetime_terms,
)
from sendonce_contract.job_lifetime import seconds_text as _seconds
from sendonce_contract.message import SES_NAME
from sendonce_contract.mis_keyed import (
    MAX_GUARD_WINDOW_S,
    MAX_RECIPIENT_CAP,
    MIN_GUARD_WINDOW_S,
    MIN_RECIPIENT_CAP,
)
from sendonce_contract.schema import Ledger
from sendonce_contract.sqs_limits import (
    SQS_DEFAULT_MESSAGE_BYTES,
    SQS_MAX_MESSAGE_BYTES,
    SQS_MAX_RETENTION_S,
    SQS_MAX_VISIBILITY_S,
    SQS_MIN_MESSAGE_BYTES,
    SQS_MIN_RETENTION_S,
    VISIBILITY_FACTOR,
    minimum_visibility_timeout_s,
)

from .errors import ID_PREFIX, SendOnceConfigurationError
from .unresolved import (
    UNRESOLVED,
    BucketFacts,
    LifecycleRuleFacts,
    Number,
    is_known,
)

if TYPE_CHECKING:  # the readings' module names the facts' types, some of them CDK's; the rules run CDK-free
    from .prop_readings import PropReadings

# AWS limits the rules are built from (Lambda and the SQS event source mapping; SQS's own in the contract).
LAMBDA_MAX_TIMEOUT_S = 900
MAX_BATCHING_WINDOW_S = 300
STANDARD_MAX_BATCH = 10_000
FIFO_MAX_BATCH = 10
UNBATCHED_MAX_BATCH = 10
MIN_MAX_CONCURRENCY = 2
MAX_MAX_CONCURRENCY = 1000
# Provisioned mode on an SQS event source (Lambda's ProvisionedPollerConfig, SQS's ranges): always-on pollers.
MIN_SQS_POLLERS = 2
MAX_SQS_MIN_POLLERS = 200
MAX_SQS_POLLERS = 2000
# SES's MaxDeliverySeconds (a configuration set's DeliveryOptions): how long SES keeps trying to deliver an email.
MIN_DELIVERY_S = 300
MAX_DELIVERY_S = 50_400
RECOMMENDED_MAX_RECEIVE_COUNT = 5
# One invocation's request, as Lambda refuses a larger one ("Request must be smaller than 6291456 bytes"): the
# event an SQS event source builds from one batch must fit it.
LAMBDA_PAYLOAD_BYTES = 6_291_456
# What the event adds to each message besides its body and attributes: messageId, receiptHandle, the system
# attributes, md5s, the queue's ARN and region, and the JSON around them (about 600 bytes; a long receipt handle more).
SQS_RECORD_ENVELOPE_BYTES = 1_024

_DOMAIN = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}$")
_ADDRESS = re.compile(r"^[^@\s<>]+@([^@\s<>]+)$")


def _fail(message: str) -> None:
    raise SendOnceConfigurationError(message)


Result = TypeVar("Result")


@dataclass(frozen=True)
class Rule:
    """One registered rule: its stable error id, and the prop its result becomes (``builds``: the rule parses the
    value given into what the pipeline is built with), if any."""

    check: Callable[[PropReadings], object]
    id: str | None  # None for ``check_ranges``: each row of ``RANGES`` has its own
    builds: str | None


# Every rule, in the order they run.
RULES: list[Rule] = []


def rule(id: str, builds: str | None = None) -> Callable[[Callable[[PropReadings], Result]],
                                                       Callable[[PropReadings], Result]]:
    """Registers a rule, and gives its errors their stable id, ``SendOnce.`` + ``id`` (the pipeline adds its
    construct path)."""

    def decorate(check: Callable[[PropReadings], Result]) -> Callable[[PropReadings], Result]:
        @functools.wraps(check)
        def checked(readings: PropReadings) -> Result:
            try:
                return check(readings)
            except SendOnceConfigurationError as error:
                raise SendOnceConfigurationError(error.message, f"{ID_PREFIX}{id}") from None

        RULES.append(Rule(checked, f"{ID_PREFIX}{id}", builds))
        return checked

    return decorate


def _bytes(size: float) -> str:
    return f"{size:.0f}" if float(size).is_integer() else f"{size:g}"


EVIDENCE_MIN_GRACE_S = 10
EVIDENCE_MIN_RECEIVES = 3  # delivered when the worker died, then to wait for SES's events, then to decide
DEFAULT_QUOTA_ALARM_PERCENT = 80.0  # of SES's 24-hour quota: time to ask SES for more before jobs wait
MAX_PACE_PER_INSTANCE = 200  # emails a second one consumer instance can send (ten parallel sends of ~50 ms)


def outbox_minimum_dedupe_ttl_s(retention_period_s: float) -> float:
    """With an outbox, a job can reach the consumer a day late (stream retention), then wait in the queue and the
    DLQ before a redrive: its key must be remembered through all three."""
    return OUTBOX_STREAM_RETENTION_S + retention_period_s + DEAD_LETTER_RETENTION_S


def attachment_lifetime_days(retention_period_s: float, dedupe_ttl_s: float, fifo: bool, outbox: bool) -> int:
    """How long an attachment must be kept: as long as its job can still reach a worker (``job_lifetime_terms``,
    the producer uploads before it enqueues), in whole days rounded up (S3 expires by the day)."""
    return -(-int(job_lifetime_s(retention_period_s, dedupe_ttl_s, fifo, outbox)) // DAY_S)


def attachment_lifetime_text(retention_period_s: float, dedupe_ttl_s: float, fifo: bool, outbox: bool) -> str:
    terms = job_lifetime_terms(retention_period_s, dedupe_ttl_s, fifo, outbox)
    return " + ".join(label for label, _ in terms)


class Unit(NamedTuple):
    """How a range rule shows a value of its prop, and a span of two."""

    value: Callable[[float], str]
    span: Callable[[float, float], str]


SECONDS = Unit(_seconds, lambda low, high: f"between {_seconds(low)} and {_seconds(high)}")
MEGABYTES = Unit(lambda size: f"{size:g} MB", lambda low, high: f"between {low:g} and {high:g} MB")
PLAIN = Unit(lambda number: f"{number:g}", lambda low, high: f"between {low:g} and {high:g}")


@dataclass(frozen=True)
class Range:
    """A prop that must lie in a range, as aws-cdk's limits are declared: the prop, its rule id, the bounds
    (``above``: the lower one excluded), the unit it is shown in, whose limit it is and the fix; ``given_only``
    weighs only a value given (not one derived). ``check_ranges`` checks every row."""

    prop: str
    id: str
    low: float
    high: float | None
    unit: Unit
    limit: str
    fix: str
    above: bool = False
    what: str = ""  # what the value is, said before its bounds
    given_only: bool = False

    def holds(self, value: float) -> bool:
        over_low = value > self.low if self.above else value >= self.low
        return over_low and (self.high is None or value <= self.high)

    def bounds(self) -> str:
        """The bounds in words: "between 1 s and 900 s", "above 0"."""
        low = self.unit.value(self.low)
        if self.high is None:
            return f"{'above' if self.above else 'at least'} {low}"
        if self.above:
            return f"above {low} and at most {self.unit.value(self.high)}"
        return self.unit.span(self.low, self.high)

    def message(self, value: float) -> str:
        return f"{self.prop} ({self.unit.value(value)}) must be {self.what}{self.bounds()}{self.limit}; {self.fix}"


RANGES = (
    Range("function_timeout", "InvalidFunctionTimeout", 1, LAMBDA_MAX_TIMEOUT_S, SECONDS, ", Lambda's limit",
          "pick a timeout in that range"),
    Range("memory_size", "InvalidMemorySize", 128, 10_240, MEGABYTES, ", Lambda's limits",
          "pick a size in that range"),
    Range("max_concurrency", "InvalidMaxConcurrency", MIN_MAX_CONCURRENCY, MAX_MAX_CONCURRENCY, PLAIN,
          ", the SQS event source's limit", "leave it unset for no cap"),
    Range("max_send_rate", "InvalidMaxSendRate", 0, None, PLAIN, " recipients per second",
          "leave it unset for no limit", above=True, given_only=True),
    Range("retention_period", "InvalidRetentionPeriod", SQS_MIN_RETENTION_S, SQS_MAX_RETENTION_S, SECONDS,
          " (14 days), SQS's limits", "pick a retention in that range"),
    Range("quota_alarm_threshold", "InvalidQuotaAlarmThreshold", 0, 100, PLAIN, "",
          "the default 80 warns with a fifth of the day's quota left", above=True,
          what="a percentage of SES's 24-hour quota "),
)


def check_ranges(p: PropReadings) -> None:
    """Every prop of ``RANGES`` within its bounds; each row's error carries the row's own id."""
    for row in RANGES:
        value = getattr(p, row.prop)  # the table names its props; each reads as a number
        if row.given_only and row.prop not in p.given:
            continue
        if is_known(value) and not row.holds(value):
            raise SendOnceConfigurationError(row.message(value), f"{ID_PREFIX}{row.id}")


RULES.append(Rule(check_ranges, None, None))  # each row raises its own id


@rule("InvalidVisibilityTimeout")
def check_visibility_timeout(p: PropReadings) -> None:
    """No ``max_batching_window`` is a window of 0 s."""
    visibility_timeout = p.visibility_timeout
    function_timeout = p.function_timeout
    max_batching_window = p.max_batching_window
    window = 0.0 if max_batching_window is None else max_batching_window
    if not (is_known(visibility_timeout) and is_known(function_timeout) and is_known(window)):
        return
    minimum = minimum_visibility_timeout_s(function_timeout, window)
    if visibility_timeout < minimum:
        _fail(
            f"visibility_timeout ({_seconds(visibility_timeout)}) must be at least {VISIBILITY_FACTOR} x "
            f"function_timeout ({_seconds(function_timeout)}) + max_batching_window ({_seconds(window)}) "
            f"= {_seconds(minimum)}, or a message still being sent becomes visible to a second consumer; "
            "raise visibility_timeout, or lower function_timeout or max_batching_window"
        )
    if visibility_timeout > SQS_MAX_VISIBILITY_S:
        _fail(
            f"visibility_timeout ({_seconds(visibility_timeout)}) exceeds SQS's maximum of {SQS_MAX_VISIBILITY_S} s "
            f"(12 hours); lower function_timeout so that {VISIBILITY_FACTOR} x function_timeout fits"
        )


@rule("InvalidBatching")
def check_batching(p: PropReadings) -> None:
    batch_size, max_batching_window, fifo = p.batch_size, p.max_batching_window, p.fifo
    if is_known(max_batching_window):
        if fifo and max_batching_window > 0:
            _fail(
                f"max_batching_window ({_seconds(max_batching_window)}) is not supported with fifo=True: Lambda's "
                "event source for FIFO queues does not batch over time; leave max_batching_window unset"
            )
        if not 0 <= max_batching_window <= MAX_BATCHING_WINDOW_S:
            _fail(
                f"max_batching_window ({_seconds(max_batching_window)}) must be between 0 s and "
                f"{MAX_BATCHING_WINDOW_S} s, the event source's limit"
            )
    if not is_known(batch_size):
        return
    limit = FIFO_MAX_BATCH if fifo else STANDARD_MAX_BATCH
    if not 1 <= batch_size <= limit:
        kind = "a FIFO" if fifo else "a standard"
        _fail(f"batch_size ({batch_size:g}) must be between 1 and {limit} for {kind} queue")
    if batch_size > UNBATCHED_MAX_BATCH and (max_batching_window is None or max_batching_window == 0):
        _fail(
            f"batch_size ({batch_size:g}) above {UNBATCHED_MAX_BATCH} needs a max_batching_window of at least 1 s "
            "(an SQS event source rule); set max_batching_window or lower batch_size to 10"
        )


@rule("InvalidMaxMessageSize")
def check_max_message_size(p: PropReadings) -> None:
    size = p.max_message_size_bytes
    if is_known(size) and (int(size) != size or not SQS_MIN_MESSAGE_BYTES <= size <= SQS_MAX_MESSAGE_BYTES):
        _fail(f"max_message_size_bytes ({_bytes(size)}) must be a whole number of bytes between "
              f"{SQS_MIN_MESSAGE_BYTES} "
              f"and {SQS_MAX_MESSAGE_BYTES} (1 MiB), SQS's limits; leave it unset for the default "
              f"{SQS_DEFAULT_MESSAGE_BYTES} (256 KiB), or give larger files through attachments_bucket")


@rule("BatchPayloadTooLarge")
def check_batch_payload(p: PropReadings) -> None:
    """A batch of the largest messages the queue takes, with each record's envelope, must fit one invocation."""
    batch_size, max_message_size_bytes = p.batch_size, p.max_message_size_bytes
    size = SQS_DEFAULT_MESSAGE_BYTES if max_message_size_bytes is None else max_message_size_bytes
    if not (is_known(batch_size) and is_known(size)):
        return
    record = size + SQS_RECORD_ENVELOPE_BYTES
    needed = batch_size * record
    if needed <= LAMBDA_PAYLOAD_BYTES:
        return
    given = "" if max_message_size_bytes is not None else ", the default"
    largest_batch = LAMBDA_PAYLOAD_BYTES // record
    fix = f"lower batch_size to {largest_batch}"
    largest_size = LAMBDA_PAYLOAD_BYTES // batch_size - SQS_RECORD_ENVELOPE_BYTES
    if largest_size >= SQS_MIN_MESSAGE_BYTES:
        fix += f" or max_message_size_bytes to {int(largest_size)}"
    _fail(f"batch_size ({batch_size:g}) x (max_message_size_bytes ({_bytes(size)}{given}) + "
          f"{SQS_RECORD_ENVELOPE_BYTES} "
          f"bytes of each record's envelope) = {needed:.0f} bytes is more than Lambda's {LAMBDA_PAYLOAD_BYTES}-byte "
          "(6 MB) invocation payload, which one batch from the queue must fit: a batch of the largest jobs could not "
          f"reach the consumer in one invocation; {fix} (files larger than a job should carry go through "
          "attachments_bucket)")


@rule("InvalidParallelism")
def check_parallelism(p: PropReadings) -> None:
    parallelism, batch_size = p.parallelism, p.batch_size
    if not is_known(parallelism):
        return
    if parallelism < 1 or int(parallelism) != parallelism:
        _fail(f"parallelism ({parallelism:g}) must be a whole number of at least 1; 1 handles records in turn")
    if is_known(batch_size) and parallelism > batch_size:
        _fail(
            f"parallelism ({parallelism:g}) must not exceed batch_size ({batch_size:g}): threads beyond the "
            "batch size never get a record; lower parallelism"
        )


@rule("InvalidSendRate")
def check_send_rate(p: PropReadings) -> None:
    """The pipeline's rate is held by pacing each instance at send_rate / max_concurrency: that needs a cap on
    Lambda's concurrency, and it replaces a per-instance max_send_rate."""
    send_rate, max_concurrency = p.send_rate, p.max_concurrency
    if not is_known(send_rate):
        return
    if send_rate <= 0:
        _fail(f"send_rate ({send_rate:g}) must be above 0 recipients per second; leave it unset for no pacing")
    if "max_send_rate" in p.given:
        _fail(f"send_rate ({send_rate:g}/s) and max_send_rate were both given: send_rate is the pipeline's rate and "
              "sets each instance's pace from max_concurrency; give one of them")
    if max_concurrency is None:
        _fail(f"send_rate ({send_rate:g}/s) needs max_concurrency: each consumer instance paces itself at send_rate "
              "/ max_concurrency, and without a cap Lambda scales out past any per-instance pace; set "
              "max_concurrency (for example 5)")
    if not is_known(max_concurrency):
        _fail(f"send_rate ({send_rate:g}/s) needs a max_concurrency known at synth, not a token: each instance's "
              "pace, send_rate / max_concurrency, is written into the consumer's environment at synth, so no "
              "instance would be paced; give max_concurrency as a number, or max_send_rate (each instance's pace) "
              "with the token")
    if is_known(max_concurrency) and send_rate / max_concurrency > MAX_PACE_PER_INSTANCE:
        _fail(f"send_rate ({send_rate:g}/s) over max_concurrency ({max_concurrency:g}) is "
              f"{send_rate / max_concurrency:g} emails/s per instance, more than one instance sends "
              f"({MAX_PACE_PER_INSTANCE}/s at most); raise max_concurrency")


@rule("InvalidUrgentShare")
def check_urgent_share(p: PropReadings) -> None:
    """The share is of the pipeline's send rate, for the urgent lane: it means nothing without either."""
    urgent_share, urgent_lane, send_rate = p.urgent_share, p.urgent_lane, p.send_rate
    given = "urgent_share" in p.given
    if given and not urgent_lane:
        _fail(f"urgent_share ({urgent_share:g}) was given without urgent_lane: the share is the urgent lane's; "
              "set urgent_lane=True or leave urgent_share unset")
    if given and send_rate is None:
        _fail(f"urgent_share ({urgent_share:g}) needs send_rate: it is a share of the pipeline's send rate; "
              "set send_rate (and max_concurrency) or leave urgent_share unset")
    if urgent_lane and is_known(urgent_share) and not 0 < urgent_share < 1:
        _fail(f"urgent_share ({urgent_share:g}) must be above 0 and below 1: it is the urgent lane's fraction of "
              "send_rate, and bulk keeps the rest; for example 0.2")


@rule("UrgentLaneNeedsSendRate")
def check_urgent_lane_rate(p: PropReadings) -> None:
    if p.urgent_lane and "max_send_rate" in p.given:
        _fail(f"urgent_lane with max_send_rate ({p.max_send_rate:g}/s per instance): the lanes split the "
              "pipeline's rate, which a per-instance rate does not say; give send_rate (and max_concurrency) instead")


@rule("InvalidUrgentAlarmThreshold")
def check_urgent_oldest_message_alarm_threshold(p: PropReadings) -> None:
    threshold, urgent_lane = p.urgent_oldest_message_alarm_threshold, p.urgent_lane
    oldest_message_alarm_threshold = p.oldest_message_alarm_threshold
    if "urgent_oldest_message_alarm_threshold" in p.given and not urgent_lane:
        shown = _seconds(threshold) if is_known(threshold) else "a token"
        _fail(f"urgent_oldest_message_alarm_threshold ({shown}) was given "
              "without urgent_lane: there is no urgent queue to watch; set urgent_lane=True or leave it unset")
    if not (urgent_lane and is_known(threshold)):
        return
    if threshold <= 0:
        _fail(f"urgent_oldest_message_alarm_threshold ({_seconds(threshold)}) must be above 0 s")
    if is_known(oldest_message_alarm_threshold) and oldest_message_alarm_threshold is not None \
            and threshold > oldest_message_alarm_threshold:
        _fail(f"urgent_oldest_message_alarm_threshold ({_seconds(threshold)}) is above oldest_message_alarm_threshold "
              f"({_seconds(oldest_message_alarm_threshold)}): urgent jobs would alarm later than bulk ones; lower it")


@rule("InvalidMaxReceiveCount")
def check_max_receive_count(p: PropReadings) -> None:
    """Fails below 1; below the recommended 5 is a warning (``derivations.low_max_receive_count``)."""
    max_receive_count = p.max_receive_count
    if is_known(max_receive_count) and max_receive_count < 1:
        _fail(
            f"max_receive_count ({max_receive_count:g}) must be at least 1: it is how many deliveries a message "
            f"gets before it moves to the dead-letter queue; use {RECOMMENDED_MAX_RECEIVE_COUNT} or more"
        )


@rule("DedupeTtlTooShort")
def check_dedupe_ttl(p: PropReadings) -> None:
    dedupe_ttl, retention_period = p.dedupe_ttl, p.retention_period
    if not (is_known(dedupe_ttl) and is_known(retention_period)):
        return
    if dedupe_ttl < retention_period:
        _fail(
            f"dedupe_ttl ({_seconds(dedupe_ttl)}) must be at least the queue's retention_period "
            f"({_seconds(retention_period)}): a key forgotten while its message can still be delivered is sent "
            "twice; raise dedupe_ttl or lower retention_period"
        )


@rule("OutboxDedupeTtlTooShort")
def check_outbox_dedupe_ttl(p: PropReadings) -> None:
    outbox, dedupe_ttl, retention_period = p.outbox, p.dedupe_ttl, p.retention_period
    if not (outbox and is_known(dedupe_ttl) and is_known(retention_period)):
        return
    minimum = outbox_minimum_dedupe_ttl_s(retention_period)
    if dedupe_ttl < minimum:
        _fail(
            f"dedupe_ttl ({_seconds(dedupe_ttl)}) must be at least stream retention (86400 s) + retention_period "
            f"({_seconds(retention_period)}) + the DLQ's 14 days = {_seconds(minimum)} with outbox=True: a relayed job "
            "can arrive that late, and a forgotten key is sent twice; raise dedupe_ttl or leave it unset"
        )


@rule("InvalidEvidenceGracePeriod")
def check_evidence_grace_period(p: PropReadings) -> None:
    """With SES's events, waiting for them must never push a job into the DLQ, nor outlive the job's retention."""
    grace_s, visibility_timeout_s, retention_s = p.evidence_grace_period, p.visibility_timeout, p.retention_period
    max_receive_count = p.max_receive_count
    if not (p.ses_events and is_known(grace_s)):
        return
    if not EVIDENCE_MIN_GRACE_S <= grace_s <= SQS_MAX_VISIBILITY_S:
        _fail(
            f"evidence_grace_period ({_seconds(grace_s)}) must be between {EVIDENCE_MIN_GRACE_S} s and "
            f"{SQS_MAX_VISIBILITY_S} s (12 hours, SQS's longest visibility timeout, which brings the job back when "
            "it ends); pick a period in that range"
        )
    if is_known(max_receive_count) and max_receive_count < EVIDENCE_MIN_RECEIVES:
        _fail(
            f"max_receive_count ({max_receive_count:g}) must be at least {EVIDENCE_MIN_RECEIVES} with ses_events: a "
            "job whose worker died is received once more to wait for SES's events and once more to be decided, "
            "and would otherwise land in the DLQ unsent; raise max_receive_count, or set ses_events=False"
        )
    if is_known(visibility_timeout_s) and is_known(retention_s):
        needed = 2 * visibility_timeout_s + grace_s
        if retention_s < needed:
            _fail(
                f"retention_period ({_seconds(retention_s)}) must be at least 2 x visibility_timeout "
                f"({_seconds(visibility_timeout_s)}) + evidence_grace_period ({_seconds(grace_s)}) = "
                f"{_seconds(needed)}, or a job waiting for SES's events expires from the queue; raise retention_period "
                "or lower evidence_grace_period"
            )


@rule("EvidenceGracePeriodWithoutEvents")
def check_evidence_grace_period_needs_events(p: PropReadings) -> None:
    ses_events = p.ses_events
    if not ses_events and "evidence_grace_period" in p.given:
        _fail("evidence_grace_period was given with ses_events=False: without SES's events there is nothing to wait "
              "for; drop evidence_grace_period or turn ses_events on")


@rule("InvalidSender")
def check_sender(p: PropReadings) -> None:
    """The SES identity given by name: a domain (``example.com``) or an address (``receipts@example.com``); None
    for an ``IEmailIdentity``."""
    sender = p.sender
    if sender is None or _ADDRESS.match(sender) or _DOMAIN.match(sender):
        return
    _fail(
        f"sender ({sender!r}) must be an SES identity: a domain such as 'example.com' or an address such as "
        "'receipts@example.com' (no display name)"
    )


@rule("InvalidFromAddresses")
def check_from_addresses(p: PropReadings) -> None:
    from_addresses, sender_name = p.from_addresses, p.sender_name
    if from_addresses is None:
        return
    if not from_addresses:
        _fail("from_addresses must not be empty when given; leave it unset to allow any address of the sender")
    for address in from_addresses:
        match = _ADDRESS.match(address)
        if not match:
            _fail(
                f"from_addresses entry {address!r} must be a bare address such as 'receipts@example.com' "
                "(the ses:FromAddress condition compares bare addresses)"
            )
            return
        if not is_known(sender_name):
            continue
        if "@" in sender_name and address.lower() != sender_name.lower():
            _fail(
                f"from_addresses entry {address!r} is not the sender identity {sender_name!r}: an address identity "
                "can send only as itself; use a domain identity to send from several addresses"
            )
        if "@" not in sender_name and match.group(1).lower() != sender_name.lower():
            _fail(
                f"from_addresses entry {address!r} is not in the sender domain {sender_name!r}: SES would refuse "
                f"it; use an address @{sender_name}"
            )


@rule("TablePropsWithExistingTable")
def check_table_choice(p: PropReadings) -> None:
    existing_table = p.existing_table
    names = ", ".join(name for name in ("removal_policy", "deletion_protection") if name in p.given)
    if existing_table is not None and names:
        _fail(
            f"existing_table and {names} were both given: the overrides shape a table this construct makes, "
            "and it makes none when you bring your own; drop one of them"
        )


@rule("ExistingTableKeySchema")
def check_existing_table_keys(p: PropReadings) -> None:
    """Checked when the table is defined in the app: an imported one's schema is not known at synth."""
    existing_table = p.existing_table
    if existing_table is None or existing_table.key_schema is None:
        return
    partition_keys, sort_keys = existing_table.key_schema
    if list(partition_keys) == [(Ledger.KEY, "STRING")] and not sort_keys:
        return
    given = ", ".join(f"{name!r} ({kind})" for name, kind in partition_keys) or "none"
    sort = f" and sort key {', '.join(repr(k) for k in sort_keys)}" if sort_keys else ""
    _fail(
        f"existing_table has partition key {given}{sort}: the dedupe ledger reads and writes items keyed by "
        f"'{Ledger.KEY}' (STRING) alone, so every claim would fail at run time; create the table with "
        f"partition_key=dynamodb.Attribute(name='{Ledger.KEY}', type=dynamodb.AttributeType.STRING) and no sort key"
    )


@rule("InvalidEncryption")
def check_encryption(p: PropReadings) -> None:
    """``p.encryption`` is the name of the ``sqs.QueueEncryption`` member (``KMS``); left unset, it is derived."""
    encryption_key, encryption, given = p.encryption_key, p.encryption, "encryption" in p.given
    if encryption == "UNENCRYPTED":
        _fail(
            "encryption (UNENCRYPTED) is not allowed: jobs carry recipients' addresses and content; use "
            "sqs.QueueEncryption.SQS_MANAGED (the default) or KMS"
        )
    if encryption_key is not None and given and encryption != "KMS":
        _fail(
            f"encryption_key was given with encryption ({encryption}): the key would be ignored; set "
            "encryption=sqs.QueueEncryption.KMS or leave encryption unset"
        )


@rule("InvalidReservedConcurrency")
def check_reserved_concurrency(p: PropReadings) -> None:
    reserved, max_concurrency = p.reserved_concurrent_executions, p.max_concurrency
    if not is_known(reserved):
        return
    if reserved < 1:
        _fail(f"reserved_concurrent_executions ({reserved:g}) must be at least 1; 0 would stop the consumer: to "
              "stop sending without deleting anything, set enabled=False")
    if is_known(max_concurrency) and reserved < max_concurrency:
        _fail(f"reserved_concurrent_executions ({reserved:g}) is below max_concurrency ({max_concurrency:g}): the "
              "event source would start invocations Lambda then throttles, and throttled batches come back after "
              "the visibility timeout; raise reserved_concurrent_executions or lower max_concurrency")


@rule("BytecodeForAnotherPython")
def check_precompiled_bytecode(p: PropReadings) -> None:
    """``runtime`` as Lambda names it (``python3.11``)."""
    runtime, synth_python = p.runtime, p.synth_python
    major, minor = synth_python.version
    if not p.precompiled_bytecode or runtime == f"python{major}.{minor}":
        return
    given = "" if "runtime" in p.given else " (the default: the newest runtime aws-cdk-lib knows, which moves on)"
    fix = (f"pin runtime=lambda_.Runtime.PYTHON_{major}_{minor}" if synth_python.runtime_known else
           f"run synth with the Python of a Lambda runtime (aws-cdk-lib has no Python {major}.{minor} runtime)")
    _fail(f"precompiled_bytecode=True with runtime {runtime}{given}, while synth runs on Python "
          f"{major}.{minor}: Lambda's interpreter reads only bytecode of its own version, so it would compile the "
          f"source again; {fix}, or leave precompiled_bytecode off")


@rule("VpcOptionsWithoutVpc")
def check_vpc_choice(p: PropReadings) -> None:
    vpc = p.vpc
    vpc_options = [name for name in ("vpc_subnets", "security_groups") if name in p.given]
    if vpc_options and vpc is None:
        _fail(f"{', '.join(vpc_options)} given without vpc: they place the functions in a VPC and mean nothing "
              "without one; pass vpc too, or drop them")


@rule("DeadLetterQueueKind")
def check_dead_letter_queue(p: PropReadings) -> None:
    dead_letter_queue, fifo = p.dead_letter_queue, p.fifo
    queue_fifo = None if dead_letter_queue is None else dead_letter_queue.fifo
    if queue_fifo is not None and queue_fifo != fifo:
        _fail(f"dead_letter_queue is {'' if queue_fifo else 'not '}a FIFO queue while fifo is {fifo}: SQS redrives "
              "only between queues of one kind; give a dead-letter queue of the job queue's kind")


@rule("DeadLetterQueueRetention")
def check_dead_letter_queue_retention(p: PropReadings) -> None:
    dead_letter_queue = p.dead_letter_queue
    retention_s = None if dead_letter_queue is None else dead_letter_queue.retention_s
    if is_known(retention_s) and retention_s < DEAD_LETTER_RETENTION_S:
        _fail(f"dead_letter_queue keeps messages {_seconds(retention_s)}; it must keep them "
              f"{DEAD_LETTER_RETENTION_S} s (14 days, SQS's longest): a job dead-lettered is a job not sent, and the "
              "dedupe_ttl rules count on it waiting that long for a redrive; create it with "
              "retention_period=Duration.days(14)")


@rule("DeadLetterQueueMessageSize")
def check_dead_letter_queue_message_size(p: PropReadings) -> None:
    """The consumer dead-letters a job by sending it, with its reason, to the DLQ: it must take any job the queue
    does."""
    dead_letter_queue, max_message_size_bytes = p.dead_letter_queue, p.max_message_size_bytes
    dlq_bytes = None if dead_letter_queue is None else dead_letter_queue.max_message_bytes
    size = SQS_DEFAULT_MESSAGE_BYTES if max_message_size_bytes is None else max_message_size_bytes
    if is_known(dlq_bytes) and is_known(size) and dlq_bytes < size:
        _fail(f"dead_letter_queue takes messages of at most {_bytes(dlq_bytes)} bytes, less than the job queue's "
              f"max_message_size_bytes ({_bytes(size)}): a large job could not be dead-lettered with its reason; "
              "create it "
              f"with max_message_size_bytes={SQS_MAX_MESSAGE_BYTES}")


@rule("AttachmentsExpiryUnknown")
def check_attachments_expiry(p: PropReadings) -> None:
    attachments_bucket, attachments_expiry_days = p.attachments_bucket, p.attachments_expiry_days
    if attachments_bucket is True and attachments_expiry_days is UNRESOLVED:
        _fail("attachments_bucket=True makes a bucket whose objects expire once no job can still be sent, derived "
              "from retention_period and dedupe_ttl, and one of them is a token known only at deploy time; give "
              "both as plain durations, or bring your own bucket (attachments_bucket=s3.Bucket(...)) with its own "
              "lifecycle")


@rule("AttachmentsBucketExpiresTooSoon")
def check_attachments_bucket_lifecycle(p: PropReadings) -> None:
    """A bucket given must keep each attachment readable as long as its job can still be sent."""
    attachments_bucket, days = p.attachments_bucket, p.attachments_expiry_days
    if not (isinstance(attachments_bucket, BucketFacts) and attachments_bucket.lifecycle_rules is not None
            and is_known(days)):
        return
    why = (f"a job can still be sent {days} days after its attachments were uploaded ({p.attachments_lifetime}), "
           "and one whose attachment is gone goes to the DLQ unsent")
    for lifecycle in attachments_bucket.lifecycle_rules:
        _check_lifecycle_rule(lifecycle, days, why)


def _check_lifecycle_rule(lifecycle: LifecycleRuleFacts, days: int, why: str) -> None:
    name = f"attachments_bucket's lifecycle rule {lifecycle.rule_id!r}"
    if lifecycle.expiration_days is not None and lifecycle.expiration_days < days:
        _fail(f"{name} expires objects after {lifecycle.expiration_days:g} days: {why}; set its expiration to at least "
              f"{days} days, or give it a prefix the attachments are not under")
    if lifecycle.expiration_date is not None:
        _fail(f"{name} expires every object on {lifecycle.expiration_date}, however recently uploaded: {why}; expire "
              f"after at least {days} days instead, or give the rule a prefix the attachments are not under")
    if lifecycle.archive_days is not None and lifecycle.archive_days < days:
        _fail(f"{name} moves objects to {lifecycle.archive_class} after {lifecycle.archive_days:g} days, where "
              f"GetObject cannot read them without a restore: {why}; transition after at least {days} days, or to a "
              "class read at once (GLACIER_IR, STANDARD_IA, INTELLIGENT_TIERING)")


@rule("AttachmentsBucketPublic")
def check_attachments_bucket_public(p: PropReadings) -> None:
    attachments_bucket = p.attachments_bucket
    if isinstance(attachments_bucket, BucketFacts) and attachments_bucket.public_access_blocked is False:
        _fail("attachments_bucket does not block all public access: attachments are invoices, tickets and other "
              "personal files; create it with block_public_access=s3.BlockPublicAccess.BLOCK_ALL")


@rule("InvalidSuppression")
def check_suppression(p: PropReadings) -> None:
    suppression_reasons = p.suppression_reasons
    disable_suppression_list = p.disable_suppression_list
    ses_events = p.ses_events
    configuration_set = p.configuration_set
    reasons_given, disabled = suppression_reasons is not None, disable_suppression_list
    construct_makes_the_set = ses_events and configuration_set is None
    if reasons_given and disabled:
        _fail("suppression_reasons and disable_suppression_list=True were both given: a disabled list suppresses "
              "nothing; drop one of them")
    if (reasons_given or disabled) and not construct_makes_the_set:
        _fail("suppression_reasons and disable_suppression_list shape the configuration set this construct makes, "
              "and it makes none when configuration_set is given or ses_events=False; set suppression on your own "
              "configuration set instead, or drop configuration_set")


@rule("InvalidOutcomeEvents")
def check_outcome_events(p: PropReadings) -> None:
    """Left unset, outcome events are on unless the existing table has no stream (``derivations.outcome_events``)."""
    outcome_bus, existing_table, given = p.outcome_bus, p.existing_table, "outcome_events" in p.given
    if outcome_bus is not None and given and not p.outcome_events:
        _fail("outcome_bus was given with outcome_events=False: no outcome event is published; drop outcome_bus or "
              "turn outcome_events on")
    if given and p.outcome_events and existing_table is not None and not existing_table.has_stream:
        _fail("outcome_events=True needs a stream on existing_table, and it has none: enable a stream with "
              "NEW_AND_OLD_IMAGES on the table (pass an imported table with its stream ARN, "
              "Table.from_table_attributes(..., table_stream_arn=...)), or leave outcome_events unset")


@rule("InvalidTemplateName")
def check_template_names(p: PropReadings) -> None:
    """``template_names``: the names known at synth (tokens left out)."""
    template_names = p.template_names
    for name in template_names:
        if not SES_NAME.match(name):
            _fail(f"template_names entry {name!r} is not an SES template name: SES names are 1-64 letters, digits, "
                  "underscores or hyphens, so no job could use it and the grant would name no template; rename "
                  "the template or fix the entry")


@rule("InvalidAllowedRecipients", builds="allowed_recipients")
def check_allowed_recipients(p: PropReadings) -> AllowedRecipients | None:
    """A stage's recipients, parsed: each a bare address or a domain. None (the default) allows every recipient."""
    entries = p.allowed_recipients
    if entries is None:
        return None
    if not entries:
        _fail("allowed_recipients is empty: every job would be refused; list the addresses or domains this stage "
              "may send to (for example [SES_MAILBOX_SIMULATOR]), or leave it unset to allow every recipient")
    try:
        return parse_entries(entries)
    except InvalidEntry as error:
        _fail(f"allowed_recipients entry {error}; each entry is a bare address (qa@example.com) or a domain "
              "(example.com); fix or drop the entry")
    return None


@rule("InvalidRecipientCap")
def check_recipient_cap(p: PropReadings) -> None:
    """The mis-keyed-producer guard's cap: a whole number of emails per recipient per window."""
    recipient_cap = p.recipient_cap
    if not is_known(recipient_cap):
        return
    if not MIN_RECIPIENT_CAP <= recipient_cap <= MAX_RECIPIENT_CAP:  # the prop's type makes it whole
        _fail(f"recipient_cap ({recipient_cap:g}) must be a whole number from {MIN_RECIPIENT_CAP} to "
              f"{MAX_RECIPIENT_CAP}: it is the most emails one recipient may get from this pipeline in one "
              "guard_window, and a job over it is held in the DLQ; for example 20, or leave it unset for no cap")


@rule("InvalidGuardWindow")
def check_guard_window(p: PropReadings) -> None:
    """The window is the guard's: it means nothing without it, and DynamoDB keeps each window's items."""
    guard_window, suspected_doubles, recipient_cap = p.guard_window, p.suspected_doubles, p.recipient_cap
    if "guard_window" in p.given and is_known(guard_window) and suspected_doubles is None and recipient_cap is None:
        _fail(f"guard_window ({_seconds(guard_window)}) was given without suspected_doubles or recipient_cap: "
              "it is the mis-keyed-producer guard's window; turn one of them on or leave guard_window unset")
    if is_known(guard_window) and not MIN_GUARD_WINDOW_S <= guard_window <= MAX_GUARD_WINDOW_S:
        _fail(f"guard_window ({_seconds(guard_window)}) must be between {MIN_GUARD_WINDOW_S} s and "
              f"{MAX_GUARD_WINDOW_S // 3600} hours: the guard compares each email with those of the window before "
              "it; for example Duration.hours(1)")


@rule("InvalidMaxJobAge")
def check_max_job_age(p: PropReadings) -> None:
    """A lane's age limit: long enough for a send, no longer than a dead letter is kept; the urgent one needs its
    lane."""
    max_job_age, urgent_max_job_age, urgent_lane = p.max_job_age, p.urgent_max_job_age, p.urgent_lane
    for name, age in (("max_job_age", max_job_age), ("urgent_max_job_age", urgent_max_job_age)):
        if is_known(age) and not MIN_JOB_AGE_S <= age <= MAX_JOB_AGE_S:
            _fail(f"{name} ({_seconds(age)}) must be between {MIN_JOB_AGE_S} s and {MAX_JOB_AGE_S // DAY_S} days: "
                  "a job older than this since its first queueing is not sent; for example Duration.minutes(15) for "
                  "one-time codes, or leave it unset")
    if urgent_max_job_age is not None and not urgent_lane:
        _fail("urgent_max_job_age was given without urgent_lane: it is the urgent lane's age limit; set "
              "urgent_lane=True, or give max_job_age for the pipeline's one lane")


@rule("InvalidProvisionedPollers")
def check_provisioned_pollers(p: PropReadings) -> None:
    """A lane's provisioned pollers: within SQS's ranges, never beside a maximum concurrency (Lambda takes one or
    the other on an event source, and a paced lane needs its cap); the urgent lane's need its lane."""
    provisioned_pollers = p.provisioned_pollers
    urgent_provisioned_pollers = p.urgent_provisioned_pollers
    max_concurrency = p.max_concurrency
    urgent_lane = p.urgent_lane
    for name, pollers in (("provisioned_pollers", provisioned_pollers),
                          ("urgent_provisioned_pollers", urgent_provisioned_pollers)):
        if pollers is None:
            continue
        low, high = pollers.minimum, pollers.maximum
        if is_known(low) and low is not None and not MIN_SQS_POLLERS <= low <= MAX_SQS_MIN_POLLERS:
            _fail(f"{name}'s minimum_pollers ({low:g}) must be between {MIN_SQS_POLLERS} and {MAX_SQS_MIN_POLLERS} "
                  "(SQS's range for provisioned mode; each is billed every hour it is provisioned); for example "
                  f"ProvisionedPollerConfig(minimum_pollers={MIN_SQS_POLLERS})")
        if is_known(high) and high is not None and not MIN_SQS_POLLERS <= high <= MAX_SQS_POLLERS:
            _fail(f"{name}'s maximum_pollers ({high:g}) must be between {MIN_SQS_POLLERS} and {MAX_SQS_POLLERS} "
                  "(SQS's range for provisioned mode); for example ProvisionedPollerConfig(minimum_pollers=2, "
                  "maximum_pollers=20)")
        if is_known(low) and is_known(high) and low is not None and high is not None and low > high:
            _fail(f"{name}'s minimum_pollers ({low:g}) is above its maximum_pollers ({high:g}): the lane would keep "
                  "more pollers than it may scale to; lower minimum_pollers or raise maximum_pollers")
        if max_concurrency is not None:
            _fail(f"{name} was given with max_concurrency ({_number_text(max_concurrency)}): Lambda takes provisioned "
                  "pollers or a maximum concurrency on an event source, not both, and a lane paced by send_rate "
                  "needs its cap; leave max_concurrency (and send_rate) unset for a lane with provisioned pollers, "
                  f"or drop {name}")
    if urgent_provisioned_pollers is not None and not urgent_lane:
        _fail("urgent_provisioned_pollers was given without urgent_lane: it is the urgent lane's pollers; set "
              "urgent_lane=True, or give provisioned_pollers for the pipeline's one lane")


def _number_text(value: Number) -> str:
    return "a token" if not is_known(value) else f"{value:g}"


@rule("InvalidMaxDeliveryDuration")
def check_max_delivery_duration(p: PropReadings) -> None:
    """How long SES keeps trying to deliver a lane's emails: within SES's range, on a configuration set the
    construct makes (it cannot change a set it was given); the urgent one needs its lane."""
    max_delivery_duration = p.max_delivery_duration
    urgent_max_delivery_duration = p.urgent_max_delivery_duration
    ses_events = p.ses_events
    configuration_set = p.configuration_set
    urgent_lane = p.urgent_lane
    for name, duration in (("max_delivery_duration", max_delivery_duration),
                           ("urgent_max_delivery_duration", urgent_max_delivery_duration)):
        if duration is None:
            continue
        if is_known(duration) and not MIN_DELIVERY_S <= duration <= MAX_DELIVERY_S:
            _fail(f"{name} ({_seconds(duration)}) must be between {MIN_DELIVERY_S // 60} minutes and "
                  f"{MAX_DELIVERY_S // 3600} hours (SES's MaxDeliverySeconds): how long SES keeps trying to deliver "
                  "an email; for example Duration.minutes(15) for one-time codes")
        if not ses_events or configuration_set is not None:
            _fail(f"{name} sets the delivery options of the configuration set this construct makes, and it makes "
                  "none when configuration_set is given or ses_events=False; set MaxDeliverySeconds on your own "
                  f"configuration set instead, or drop configuration_set")
    if urgent_max_delivery_duration is not None and not urgent_lane:
        _fail("urgent_max_delivery_duration was given without urgent_lane: it is the urgent lane's; set "
              "urgent_lane=True, or give max_delivery_duration for the pipeline's one lane")


@rule("InvalidWaitingRoom")
def check_waiting_room(p: PropReadings) -> None:
    """A waiting room holds scheduled and parked jobs, which a FIFO queue keeps in their group (left unset, it is on
    for a standard queue only: ``derivations.waiting_room``)."""
    fifo = p.fifo
    if "waiting_room" in p.given and p.waiting_room and fifo:
        _fail("waiting_room=True was given with fifo=True: the room holds jobs scheduled with sendAt, which a FIFO "
              "queue refuses, and a FIFO job parked while SES stops sending keeps its group's order by waiting in "
              "its queue, so nothing would ever wait there; drop waiting_room, or schedule on a standard queue")
