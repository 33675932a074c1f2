"""Each prop's value as the rules see it, read once (``props.resolve_props``): a duration in seconds, a token as
``UNRESOLVED``, and the CDK objects a rule weighs as plain facts (``TableFacts``, ``QueueFacts``), so that the rules
stay CDK-free. Also what the consumer's environment takes (``seconds``, ``known``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs

from sendonce_contract.sqs_limits import SQS_DEFAULT_MESSAGE_BYTES, SQS_DEFAULT_RETENTION_S

from .unresolved import (
    UNRESOLVED,
    BucketFacts,
    LifecycleRuleFacts,
    PollerFacts,
    QueueFacts,
    TableFacts,
    Unresolved,
    is_known,
)

Read = TypeVar("Read", str, float)


def read(value: Read | None) -> Read | Unresolved | None:
    """A value as the rules see it: None when absent, ``UNRESOLVED`` when a token."""
    if value is None:
        return None
    return UNRESOLVED if Token.is_unresolved(value) else value


def read_seconds(duration: Duration | None) -> float | Unresolved | None:
    """A duration in seconds as the rules see it: None when absent, ``UNRESOLVED`` when a token."""
    if duration is None:
        return None
    return UNRESOLVED if duration.is_unresolved() else duration.to_seconds()


def seconds(duration: Duration | None) -> float | None:
    """For the consumer's environment: seconds, or None when absent or a token."""
    if duration is None or duration.is_unresolved():
        return None
    return duration.to_seconds()


Known = TypeVar("Known", str, float)


def known(value: Known | None) -> Known | None:
    """For the consumer's environment: ``value``, or None when it is absent or a token resolved only at deploy."""
    return None if value is None or Token.is_unresolved(value) else value


def reading(name: str, value: object) -> object:
    """The prop ``name``'s ``value`` as the rules see it."""
    if value is None:
        return None
    special = READERS.get(name)
    if special is not None:
        return special(value)
    if isinstance(value, Duration):
        return read_seconds(value)
    if isinstance(value, str):
        return read(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return UNRESOLVED if Token.is_unresolved(value) else value
    return value


def _sender(sender: object) -> str | None:
    # The identity given by name (an IEmailIdentity's name is the sender_name fact).
    return sender if isinstance(sender, str) else None


def _enum_name(value: object) -> str:
    # sqs.QueueEncryption's member name, lambda_.Runtime's Lambda name (python3.11): as the rules' messages say them.
    name = getattr(value, "name")  # noqa: B009 (jsii types declare no common base)
    assert isinstance(name, str)
    return name


def _known_names(names: object) -> list[str]:
    assert isinstance(names, Sequence)
    return [name for name in names if is_known(read(name))]


def _table(given: object) -> TableFacts:
    table = cast(dynamodb.ITable, given)  # jsii interfaces are not checkable at run time; the type check passed
    return TableFacts(key_schema=_key_schema(table), has_stream=table.table_stream_arn is not None)


def _queue(given: object) -> QueueFacts:
    queue = cast(sqs.IQueue, given)
    return QueueFacts(fifo=_fifo_of(queue), retention_s=_retention_of(queue),
                      max_message_bytes=_max_message_bytes_of(queue))


def _pollers(given: object) -> PollerFacts:
    config = cast(lambda_.ProvisionedPollerConfig, given)
    return PollerFacts(minimum=read(config.minimum_pollers), maximum=read(config.maximum_pollers))


def _max_message_bytes_of(queue: sqs.IQueue) -> float | Unresolved:
    """The largest message a queue defined in this app takes; unset, 256 KiB (SQS's default for a queue made before
    2025, smaller than today's 1 MiB, so a check on it errs toward refusing); UNRESOLVED otherwise."""
    return _queue_number(queue, "maximum_message_size", SQS_DEFAULT_MESSAGE_BYTES)


# Storage classes whose objects GetObject refuses until restored (Intelligent-Tiering's archive tiers are opt-in
# configurations of the bucket, not lifecycle transitions).
_ARCHIVE_CLASSES = ("GLACIER", "DEEP_ARCHIVE")


def _attachments_bucket(given: object) -> bool | BucketFacts:
    """``True``/``False`` as given; a bucket as the facts a rule weighs (none for an imported one)."""
    if isinstance(given, bool):
        return given
    bucket = cast(s3.IBucket, given)
    cfn = bucket.node.default_child if isinstance(bucket, s3.Bucket) else None
    if not isinstance(cfn, s3.CfnBucket):
        return BucketFacts(lifecycle_rules=None, public_access_blocked=None)
    # The L1's properties as the L2 set them (reading its typed lifecycle property fails on the L2's lazy value).
    stack, properties = Stack.of(bucket), cfn._cfn_properties
    lifecycle = stack.resolve(properties.get("lifecycleConfiguration")) or {}
    rules = [_lifecycle_rule(rule) for rule in lifecycle.get("rules") or [] if _reaches_every_object(rule)]
    return BucketFacts(lifecycle_rules=rules, public_access_blocked=_public_access_blocked(
        stack.resolve(properties.get("publicAccessBlockConfiguration"))))


def _reaches_every_object(rule: dict[str, object]) -> bool:
    # A prefix or a tag filter may or may not match the attachments' keys: only the rules that reach every object
    # are checked (an object size filter still reaches attachments of that size).
    return (rule.get("status") == "Enabled" and not rule.get("prefix") and not rule.get("tagFilters"))


def _lifecycle_rule(rule: dict[str, Any]) -> LifecycleRuleFacts:
    archived = sorted((float(t["transitionInDays"]), t["storageClass"]) for t in rule.get("transitions") or []
                      if t.get("storageClass") in _ARCHIVE_CLASSES and "transitionInDays" in t)
    archive_days, archive_class = archived[0] if archived else (None, None)
    days = rule.get("expirationInDays")
    return LifecycleRuleFacts(
        rule_id=str(rule.get("id", "(no id)")),
        expiration_days=None if days is None or Token.is_unresolved(days) else float(days),
        expiration_date=rule.get("expirationDate"),
        archive_days=archive_days,
        archive_class=archive_class,
    )


def _public_access_blocked(configuration: dict[str, Any] | None) -> bool | None:
    """None (no configuration: S3 blocks public access on every new bucket), or whether all four blocks are on."""
    if not configuration:
        return None
    keys = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    return all(configuration.get(key) is True for key in keys)


def _fifo_of(queue: sqs.IQueue) -> bool | None:
    """Whether a queue given is FIFO; None when CDK cannot tell (an imported queue without the .fifo name)."""
    fifo = getattr(queue, "fifo", None)
    return fifo if isinstance(fifo, bool) else None


def _retention_of(queue: sqs.IQueue) -> float | Unresolved:
    """How long a queue defined in this app keeps messages (SQS's default 4 days when unset); UNRESOLVED for an
    imported queue (CDK cannot tell) or a token."""
    return _queue_number(queue, "message_retention_period", SQS_DEFAULT_RETENTION_S)


def _queue_number(queue: sqs.IQueue, attribute: str, default: int) -> float | Unresolved:
    """A number property of a queue defined in this app (SQS's ``default`` when unset); UNRESOLVED for an imported
    queue or a token."""
    cfn = queue.node.default_child if isinstance(queue, sqs.Queue) else None
    if not isinstance(cfn, sqs.CfnQueue):
        return UNRESOLVED
    value = getattr(cfn, attribute)
    if value is None:
        return float(default)
    return UNRESOLVED if Token.is_unresolved(value) else float(value)


_ATTRIBUTE_TYPES = {"S": "STRING", "N": "NUMBER", "B": "BINARY"}


def _key_schema(table: dynamodb.ITable) -> tuple[list[tuple[str, str]], list[str]] | None:
    """The key attributes of a table defined in this app (a ``Table`` or a ``TableV2``); None for an imported one,
    whose schema CDK cannot see."""
    schema_v2 = getattr(table, "schema_v2", None)
    if schema_v2 is not None:
        schema = schema_v2()
        return ([(a.name, a.type.name) for a in schema.partition_keys], [a.name for a in schema.sort_keys])
    cfn = table.node.default_child if isinstance(table, dynamodb.TableV2) else None
    if not isinstance(cfn, dynamodb.CfnGlobalTable):
        return None
    # TableV2 exposes no schema: its L1 holds the key schema, and the attribute types as a lazy list.
    definitions = Stack.of(table).resolve(cfn.attribute_definitions) or []
    types = {d["attributeName"]: _ATTRIBUTE_TYPES.get(d["attributeType"], d["attributeType"]) for d in definitions}
    keys = [(k.attribute_name, k.key_type) for k in cfn.key_schema]  # type: ignore[union-attr]
    return ([(name, types.get(name, "?")) for name, kind in keys if kind == "HASH"],
            [name for name, kind in keys if kind == "RANGE"])


# The props a rule sees otherwise than as their plain value.
READERS: dict[str, Callable[[object], object]] = {
    "sender": _sender,
    "encryption": _enum_name,
    "runtime": _enum_name,
    "template_names": _known_names,
    "existing_table": _table,
    "dead_letter_queue": _queue,
    "attachments_bucket": _attachments_bucket,
    "provisioned_pollers": _pollers,
    "urgent_provisioned_pollers": _pollers,
}
