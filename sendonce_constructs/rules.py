"""The synth-time rules that keep the pipeline's guarantees, one small function per rule.

Each rule gets plain values (seconds, counts) already read from the props: ``None`` for a prop not given, and
``UNRESOLVED`` for a value that is an unresolved token: CDK cannot know it at synth time, so the rule is skipped
rather than guessed.
Each raises :class:`SendOnceConfigurationError` naming the prop, the value given, the rule and the fix.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from sendonce_contract.allowed_recipients import AllowedRecipients, InvalidEntry, parse_entries
from sendonce_contract.message import SES_NAME
from sendonce_contract.schema import Ledger

from .errors import ID_PREFIX, SendOnceConfigurationError
from .unresolved import Number, Unresolved, is_known

# AWS limits the rules are built from (Lambda, SQS and the SQS event source mapping).
LAMBDA_MAX_TIMEOUT_S = 900
SQS_MAX_VISIBILITY_S = 43_200
SQS_MIN_RETENTION_S = 60
SQS_MAX_RETENTION_S = 1_209_600
MAX_BATCHING_WINDOW_S = 300
STANDARD_MAX_BATCH = 10_000
FIFO_MAX_BATCH = 10
UNBATCHED_MAX_BATCH = 10
MIN_MAX_CONCURRENCY = 2
MAX_MAX_CONCURRENCY = 1000
RECOMMENDED_MAX_RECEIVE_COUNT = 5
VISIBILITY_FACTOR = 6

_DOMAIN = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z0-9-]{2,63}$")
_ADDRESS = re.compile(r"^[^@\s<>]+@([^@\s<>]+)$")


def _fail(message: str) -> None:
    raise SendOnceConfigurationError(message)


Params = ParamSpec("Params")
Result = TypeVar("Result")


# Each rule's stable error id, by the rule's function name.
RULE_IDS: dict[str, str] = {}


def rule(id: str) -> Callable[[Callable[Params, Result]], Callable[Params, Result]]:
    """Gives a rule's errors its stable id, ``SendOnce.`` + ``id`` (the pipeline adds its construct path)."""

    def decorate(check: Callable[Params, Result]) -> Callable[Params, Result]:
        RULE_IDS[check.__name__] = f"{ID_PREFIX}{id}"

        @functools.wraps(check)
        def checked(*args: Params.args, **kwargs: Params.kwargs) -> Result:
            try:
                return check(*args, **kwargs)
            except SendOnceConfigurationError as error:
                raise SendOnceConfigurationError(error.message, f"{ID_PREFIX}{id}") from None

        return checked

    return decorate


def _s(seconds: float) -> str:
    # Whole seconds in full ("1641600 s", never "1.6416e+06 s"); fractions as they are.
    return f"{seconds:.0f} s" if float(seconds).is_integer() else f"{seconds:g} s"


@rule("InvalidFunctionTimeout")
def check_function_timeout(function_timeout_s: Number) -> None:
    if is_known(function_timeout_s) and not 1 <= function_timeout_s <= LAMBDA_MAX_TIMEOUT_S:
        _fail(
            f"function_timeout ({_s(function_timeout_s)}) must be between 1 s and {LAMBDA_MAX_TIMEOUT_S} s, "
            "Lambda's limit; pick a timeout in that range"
        )


def minimum_visibility_timeout_s(function_timeout_s: float, max_batching_window_s: float) -> float:
    """AWS guidance: at least six times the function timeout, plus the batching window."""
    return VISIBILITY_FACTOR * function_timeout_s + max_batching_window_s


@rule("InvalidVisibilityTimeout")
def check_visibility_timeout(
    visibility_timeout_s: Number, function_timeout_s: Number, max_batching_window_s: Number
) -> None:
    """``max_batching_window_s`` is 0 when no window is given."""
    if not (is_known(visibility_timeout_s) and is_known(function_timeout_s) and is_known(max_batching_window_s)):
        return
    minimum = minimum_visibility_timeout_s(function_timeout_s, max_batching_window_s)
    if visibility_timeout_s < minimum:
        _fail(
            f"visibility_timeout ({_s(visibility_timeout_s)}) must be at least {VISIBILITY_FACTOR} x "
            f"function_timeout ({_s(function_timeout_s)}) + max_batching_window ({_s(max_batching_window_s)}) "
            f"= {_s(minimum)}, or a message still being sent becomes visible to a second consumer; "
            "raise visibility_timeout, or lower function_timeout or max_batching_window"
        )
    if visibility_timeout_s > SQS_MAX_VISIBILITY_S:
        _fail(
            f"visibility_timeout ({_s(visibility_timeout_s)}) exceeds SQS's maximum of {SQS_MAX_VISIBILITY_S} s "
            "(12 hours); lower function_timeout so that 6 x function_timeout fits"
        )


@rule("InvalidBatching")
def check_batching(batch_size: Number, max_batching_window_s: Number, fifo: bool) -> None:
    if is_known(max_batching_window_s):
        if fifo and max_batching_window_s > 0:
            _fail(
                f"max_batching_window ({_s(max_batching_window_s)}) is not supported with fifo=True: Lambda's "
                "event source for FIFO queues does not batch over time; leave max_batching_window unset"
            )
        if not 0 <= max_batching_window_s <= MAX_BATCHING_WINDOW_S:
            _fail(
                f"max_batching_window ({_s(max_batching_window_s)}) must be between 0 s and "
                f"{MAX_BATCHING_WINDOW_S} s, the event source's limit"
            )
    if not is_known(batch_size):
        return
    limit = FIFO_MAX_BATCH if fifo else STANDARD_MAX_BATCH
    if not 1 <= batch_size <= limit:
        kind = "a FIFO" if fifo else "a standard"
        _fail(f"batch_size ({batch_size:g}) must be between 1 and {limit} for {kind} queue")
    if batch_size > UNBATCHED_MAX_BATCH and (max_batching_window_s is None or max_batching_window_s == 0):
        _fail(
            f"batch_size ({batch_size:g}) above {UNBATCHED_MAX_BATCH} needs a max_batching_window of at least 1 s "
            "(an SQS event source rule); set max_batching_window or lower batch_size to 10"
        )


@rule("InvalidMaxConcurrency")
def check_max_concurrency(max_concurrency: Number) -> None:
    if is_known(max_concurrency) and not MIN_MAX_CONCURRENCY <= max_concurrency <= MAX_MAX_CONCURRENCY:
        _fail(
            f"max_concurrency ({max_concurrency:g}) must be between {MIN_MAX_CONCURRENCY} and "
            f"{MAX_MAX_CONCURRENCY}, the SQS event source's limit; leave it unset for no cap"
        )


@rule("InvalidMaxReceiveCount")
def check_max_receive_count(max_receive_count: Number) -> bool:
    """Fails below 1; returns True when the value is allowed but below the recommended 5 (a warning)."""
    if not is_known(max_receive_count):
        return False
    if max_receive_count < 1:
        _fail(
            f"max_receive_count ({max_receive_count:g}) must be at least 1: it is how many deliveries a message "
            f"gets before it moves to the dead-letter queue; use {RECOMMENDED_MAX_RECEIVE_COUNT} or more"
        )
    return max_receive_count < RECOMMENDED_MAX_RECEIVE_COUNT


@rule("InvalidRetentionPeriod")
def check_retention_period(retention_period_s: Number) -> None:
    if is_known(retention_period_s) and not SQS_MIN_RETENTION_S <= retention_period_s <= SQS_MAX_RETENTION_S:
        _fail(
            f"retention_period ({_s(retention_period_s)}) must be between {SQS_MIN_RETENTION_S} s and "
            f"{SQS_MAX_RETENTION_S} s (14 days), SQS's limits"
        )


@rule("DedupeTtlTooShort")
def check_dedupe_ttl(dedupe_ttl_s: Number, retention_period_s: Number) -> None:
    if not (is_known(dedupe_ttl_s) and is_known(retention_period_s)):
        return
    if dedupe_ttl_s < retention_period_s:
        _fail(
            f"dedupe_ttl ({_s(dedupe_ttl_s)}) must be at least the queue's retention_period "
            f"({_s(retention_period_s)}): a key forgotten while its message can still be delivered is sent "
            "twice; raise dedupe_ttl or lower retention_period"
        )


OUTBOX_STREAM_RETENTION_S = 86_400
DEAD_LETTER_RETENTION_S = SQS_MAX_RETENTION_S


def outbox_minimum_dedupe_ttl_s(retention_period_s: float) -> float:
    """With an outbox, a job can reach the consumer a day late (stream retention), then wait in the queue and the
    DLQ before a redrive: its key must be remembered through all three."""
    return OUTBOX_STREAM_RETENTION_S + retention_period_s + DEAD_LETTER_RETENTION_S


@rule("OutboxDedupeTtlTooShort")
def check_outbox_dedupe_ttl(dedupe_ttl_s: Number, retention_period_s: Number) -> None:
    if not (is_known(dedupe_ttl_s) and is_known(retention_period_s)):
        return
    minimum = outbox_minimum_dedupe_ttl_s(retention_period_s)
    if dedupe_ttl_s < minimum:
        _fail(
            f"dedupe_ttl ({_s(dedupe_ttl_s)}) must be at least stream retention (86400 s) + retention_period "
            f"({_s(retention_period_s)}) + the DLQ's 14 days = {_s(minimum)} with outbox=True: a relayed job can "
            "arrive that late, and a forgotten key is sent twice; raise dedupe_ttl or leave it unset"
        )


@rule("InvalidMemorySize")
def check_memory_size(memory_size: Number) -> None:
    if is_known(memory_size) and not 128 <= memory_size <= 10_240:
        _fail(f"memory_size ({memory_size:g} MB) must be between 128 and 10240 MB, Lambda's limits")


@rule("InvalidParallelism")
def check_parallelism(parallelism: Number, batch_size: Number) -> None:
    if not is_known(parallelism):
        return
    if parallelism < 1 or int(parallelism) != parallelism:
        _fail(f"parallelism ({parallelism:g}) must be a whole number of at least 1; 1 handles records in turn")
    if is_known(batch_size) and parallelism > batch_size:
        _fail(
            f"parallelism ({parallelism:g}) must not exceed batch_size ({batch_size:g}): threads beyond the "
            "batch size never get a record; lower parallelism"
        )


@rule("InvalidMaxSendRate")
def check_max_send_rate(max_send_rate: Number) -> None:
    if is_known(max_send_rate) and max_send_rate <= 0:
        _fail(f"max_send_rate ({max_send_rate:g}) must be above 0 recipients per second; leave it unset for no limit")


DEFAULT_QUOTA_ALARM_PERCENT = 80.0  # of SES's 24-hour quota: time to ask SES for more before jobs wait


@rule("InvalidQuotaAlarmThreshold")
def check_quota_alarm_threshold(percent: Number) -> None:
    if is_known(percent) and not 0 < percent <= 100:
        _fail(f"quota_alarm_threshold ({percent:g}) must be a percentage of SES's 24-hour quota above 0 and at "
              "most 100; the default 80 warns with a fifth of the day's quota left")


MAX_PACE_PER_INSTANCE = 200  # emails a second one consumer instance can send (ten parallel sends of ~50 ms)


@rule("InvalidSendRate")
def check_send_rate(send_rate: Number, max_send_rate: Number, max_concurrency: Number) -> None:
    """The pipeline's rate is held by pacing each instance at send_rate / max_concurrency: that needs a cap on
    Lambda's concurrency, and it replaces a per-instance max_send_rate."""
    if not is_known(send_rate):
        return
    if send_rate <= 0:
        _fail(f"send_rate ({send_rate:g}) must be above 0 recipients per second; leave it unset for no pacing")
    if max_send_rate is not None:
        _fail(f"send_rate ({send_rate:g}/s) and max_send_rate were both given: send_rate is the pipeline's rate and "
              "sets each instance's pace from max_concurrency; give one of them")
    if max_concurrency is None:
        _fail(f"send_rate ({send_rate:g}/s) needs max_concurrency: each consumer instance paces itself at send_rate "
              "/ max_concurrency, and without a cap Lambda scales out past any per-instance pace; set "
              "max_concurrency (for example 5)")
    if is_known(max_concurrency) and send_rate / max_concurrency > MAX_PACE_PER_INSTANCE:
        _fail(f"send_rate ({send_rate:g}/s) over max_concurrency ({max_concurrency:g}) is "
              f"{send_rate / max_concurrency:g} emails/s per instance, more than one instance sends "
              f"({MAX_PACE_PER_INSTANCE}/s at most); raise max_concurrency")


@rule("InvalidSender")
def check_sender(sender: str) -> None:
    """The SES identity: a domain (``example.com``) or an address (``receipts@example.com``)."""
    if _ADDRESS.match(sender) or _DOMAIN.match(sender):
        return
    _fail(
        f"sender ({sender!r}) must be an SES identity: a domain such as 'example.com' or an address such as "
        "'receipts@example.com' (no display name)"
    )


@rule("InvalidFromAddresses")
def check_from_addresses(from_addresses: Sequence[str], sender: str | Unresolved) -> None:
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
        if not is_known(sender):
            continue
        if "@" in sender and address.lower() != sender.lower():
            _fail(
                f"from_addresses entry {address!r} is not the sender identity {sender!r}: an address identity "
                "can send only as itself; use a domain identity to send from several addresses"
            )
        if "@" not in sender and match.group(1).lower() != sender.lower():
            _fail(
                f"from_addresses entry {address!r} is not in the sender domain {sender!r}: SES would refuse "
                f"it; use an address @{sender}"
            )


@rule("TablePropsWithExistingTable")
def check_table_choice(existing_table_given: bool, table_overrides: Sequence[str]) -> None:
    if existing_table_given and table_overrides:
        names = ", ".join(table_overrides)
        _fail(
            f"existing_table and {names} were both given: the overrides shape a table this construct makes, "
            "and it makes none when you bring your own; drop one of them"
        )


@rule("ExistingTableKeySchema")
def check_existing_table_keys(partition_keys: Sequence[tuple[str, str]], sort_keys: Sequence[str]) -> None:
    """``partition_keys`` as (name, type name) and ``sort_keys`` as names, read from a table defined in the app."""
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
def check_encryption(encryption: str | None, encryption_key_given: bool) -> None:
    """``encryption`` is the name of the ``sqs.QueueEncryption`` given, or None for the default."""
    if encryption == "UNENCRYPTED":
        _fail(
            "encryption (UNENCRYPTED) is not allowed: jobs carry recipients' addresses and content; use "
            "sqs.QueueEncryption.SQS_MANAGED (the default) or KMS"
        )
    if encryption_key_given and encryption not in (None, "KMS"):
        _fail(
            f"encryption_key was given with encryption ({encryption}): the key would be ignored; set "
            "encryption=sqs.QueueEncryption.KMS or leave encryption unset"
        )


EVIDENCE_MIN_GRACE_S = 10
EVIDENCE_MIN_RECEIVES = 3  # delivered when the worker died, then to wait for SES's events, then to decide


@rule("InvalidEvidenceGracePeriod")
def check_evidence_grace_period(
    grace_s: Number, visibility_timeout_s: Number, retention_s: Number, max_receive_count: Number,
) -> None:
    """Waiting for SES's events must never push a job into the DLQ, nor outlive the job's retention."""
    if not is_known(grace_s):
        return
    if not EVIDENCE_MIN_GRACE_S <= grace_s <= SQS_MAX_VISIBILITY_S:
        _fail(
            f"evidence_grace_period ({_s(grace_s)}) must be between {EVIDENCE_MIN_GRACE_S} s and "
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
                f"retention_period ({_s(retention_s)}) must be at least 2 x visibility_timeout "
                f"({_s(visibility_timeout_s)}) + evidence_grace_period ({_s(grace_s)}) = {_s(needed)}, or a job "
                "waiting for SES's events expires from the queue; raise retention_period or lower "
                "evidence_grace_period"
            )


@rule("EvidenceGracePeriodWithoutEvents")
def evidence_grace_period_without_events() -> None:
    _fail("evidence_grace_period was given with ses_events=False: without SES's events there is nothing to wait "
          "for; drop evidence_grace_period or turn ses_events on")


@rule("InvalidSuppression")
def check_suppression(reasons_given: bool, disabled: bool, construct_makes_the_set: bool) -> None:
    if reasons_given and disabled:
        _fail("suppression_reasons and disable_suppression_list=True were both given: a disabled list suppresses "
              "nothing; drop one of them")
    if (reasons_given or disabled) and not construct_makes_the_set:
        _fail("suppression_reasons and disable_suppression_list shape the configuration set this construct makes, "
              "and it makes none when configuration_set is given or ses_events=False; set suppression on your own "
              "configuration set instead, or drop configuration_set")


@rule("InvalidOutcomeEvents")
def check_outcome_events(outcome_events: bool | None, bus_given: bool, existing_table_has_stream: bool | None) -> bool:
    """Whether outcome events are on. ``outcome_events`` None is the default: on, unless the existing table has no
    stream to read them from (then off, with a warning); ``existing_table_has_stream`` is None with no such table."""
    if bus_given and outcome_events is False:
        _fail("outcome_bus was given with outcome_events=False: no outcome event is published; drop outcome_bus or "
              "turn outcome_events on")
    if outcome_events and existing_table_has_stream is False:
        _fail("outcome_events=True needs a stream on existing_table, and it has none: enable a stream with "
              "NEW_AND_OLD_IMAGES on the table (pass an imported table with its stream ARN, "
              "Table.from_table_attributes(..., table_stream_arn=...)), or leave outcome_events unset")
    return outcome_events is not False and existing_table_has_stream is not False


@rule("InvalidReservedConcurrency")
def check_reserved_concurrency(reserved: Number, max_concurrency: Number) -> None:
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
def check_precompiled_bytecode(runtime_name: str, runtime_given: bool, synth_version: tuple[int, int],
                               synth_runtime_known: bool) -> None:
    """``runtime_name`` as Lambda names it (``python3.11``); ``synth_version`` the Python running synth, and whether
    aws-cdk-lib has a Lambda runtime of that version."""
    major, minor = synth_version
    if runtime_name == f"python{major}.{minor}":
        return
    given = "" if runtime_given else " (the default: the newest runtime aws-cdk-lib knows, which moves on)"
    fix = (f"pin runtime=lambda_.Runtime.PYTHON_{major}_{minor}" if synth_runtime_known else
           f"run synth with the Python of a Lambda runtime (aws-cdk-lib has no Python {major}.{minor} runtime)")
    _fail(f"precompiled_bytecode=True with runtime {runtime_name}{given}, while synth runs on Python "
          f"{major}.{minor}: Lambda's interpreter reads only bytecode of its own version, so it would compile the "
          f"source again; {fix}, or leave precompiled_bytecode off")


@rule("VpcOptionsWithoutVpc")
def check_vpc_choice(vpc_given: bool, vpc_options: Sequence[str]) -> None:
    if vpc_options and not vpc_given:
        _fail(f"{', '.join(vpc_options)} given without vpc: they place the functions in a VPC and mean nothing "
              "without one; pass vpc too, or drop them")


@rule("DeadLetterQueueKind")
def check_dead_letter_queue(fifo_given: bool | None, fifo: bool) -> None:
    """``fifo_given``: whether the dead-letter queue given is FIFO, None when CDK cannot tell (an imported queue)."""
    if fifo_given is not None and fifo_given != fifo:
        _fail(f"dead_letter_queue is {'' if fifo_given else 'not '}a FIFO queue while fifo is {fifo}: SQS redrives "
              "only between queues of one kind; give a dead-letter queue of the job queue's kind")


@rule("DeadLetterQueueRetention")
def check_dead_letter_queue_retention(retention_s: Number) -> None:
    """``retention_s``: how long the dead-letter queue given keeps a message; UNRESOLVED when CDK cannot tell."""
    if is_known(retention_s) and retention_s < DEAD_LETTER_RETENTION_S:
        _fail(f"dead_letter_queue keeps messages {_s(retention_s)}; it must keep them {DEAD_LETTER_RETENTION_S} s "
              "(14 days, SQS's longest): a job dead-lettered is a job not sent, and the dedupe_ttl rules count on "
              "it waiting that long for a redrive; create it with retention_period=Duration.days(14)")


@rule("InvalidTemplateName")
def check_template_names(template_names: Sequence[str]) -> None:
    for name in template_names:
        if not SES_NAME.match(name):
            _fail(f"template_names entry {name!r} is not an SES template name: SES names are 1-64 letters, digits, "
                  "underscores or hyphens, so no job could use it and the grant would name no template; rename "
                  "the template or fix the entry")


@rule("InvalidAllowedRecipients")
def check_allowed_recipients(entries: Sequence[str] | None) -> AllowedRecipients | None:
    """A stage's recipients: each a bare address or a domain. None (the default) allows every recipient."""
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


VPC_WITHOUT_EGRESS_WARNING = "@sendonce/SendOnceEmailQueue:vpcSubnetsWithoutEgress"


def vpc_without_egress_warning(subnets: Sequence[str]) -> str:
    """The warning for functions placed in subnets with no route out and no VPC endpoint in the VPC."""
    return (f"vpc_subnets select {', '.join(subnets) or 'no subnet'} with no route to the internet (isolated or "
            "public subnets: a function gets no public address) and the VPC has no endpoint: every call to "
            "DynamoDB, SQS and SES (and Secrets Manager with key_privacy) would time out and no email would be sent; "
            "select PRIVATE_WITH_EGRESS subnets, or add VPC endpoints (a DynamoDB gateway endpoint, SQS, SES and "
            "Secrets Manager interface endpoints), or acknowledge this warning if routes are made outside this app")
