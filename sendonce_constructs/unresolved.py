"""A prop's value as a synth-time rule sees it: known, absent (``None``), or ``UNRESOLVED``: a token CDK resolves
only at deploy time, which no rule can check, so the rule skips it rather than guess.

CDK-free, as the rules are; ``readings`` reads the values (``read``, ``read_seconds``), and turns the CDK objects a
rule weighs into the plain facts below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeGuard, TypeVar


class Unresolved:
    """The state of a value that is an unresolved token at synth time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNRESOLVED"


UNRESOLVED: Final = Unresolved()

Value = TypeVar("Value")
# What a rule gets for a number: known, an unresolved token, or absent.
Number = float | Unresolved | None


def is_known(value: Value | Unresolved | None) -> TypeGuard[Value]:
    """Whether ``value`` was given and is known at synth time."""
    return value is not None and not isinstance(value, Unresolved)


@dataclass(frozen=True)
class TableFacts:
    """What a rule sees of an ``existing_table``: its key schema when the table is defined in the app (None for an
    imported one, whose schema CDK cannot see), as (name, type name) partition keys and sort key names, and whether
    it has a stream."""

    key_schema: tuple[Sequence[tuple[str, str]], Sequence[str]] | None
    has_stream: bool


@dataclass(frozen=True)
class QueueFacts:
    """What a rule sees of a ``dead_letter_queue``: whether it is FIFO (None when CDK cannot tell: an imported
    queue without the .fifo name) and how long it keeps messages (UNRESOLVED when CDK cannot tell)."""

    fifo: bool | None
    retention_s: float | Unresolved
    max_message_bytes: float | Unresolved = UNRESOLVED  # the largest message it takes


@dataclass(frozen=True)
class PollerFacts:
    """What a rule sees of a lane's ``ProvisionedPollerConfig``: its pollers' bounds, None when not given (Lambda's
    defaults), UNRESOLVED when a token."""

    minimum: float | Unresolved | None
    maximum: float | Unresolved | None


@dataclass(frozen=True)
class LifecycleRuleFacts:
    """One enabled lifecycle rule of an ``attachments_bucket`` given that can reach the attachments (its filter, if
    any, names no prefix or tag, which the attachments' keys are not promised to match or avoid): when it expires
    current objects (after days, or on a date) and when it first moves them to a storage class ``GetObject`` cannot
    read (Glacier Flexible Retrieval, Deep Archive)."""

    rule_id: str
    expiration_days: float | None
    expiration_date: str | None
    archive_days: float | None
    archive_class: str | None


@dataclass(frozen=True)
class BucketFacts:
    """What a rule sees of an ``attachments_bucket`` given: its lifecycle rules that reach every object (None for an
    imported bucket, whose rules CDK cannot see) and whether public access is blocked (None when CDK cannot tell)."""

    lifecycle_rules: Sequence[LifecycleRuleFacts] | None
    public_access_blocked: bool | None


@dataclass(frozen=True)
class SynthPython:
    """The Python running synth: its version, and whether aws-cdk-lib has a Lambda runtime of that version."""

    version: tuple[int, int]
    runtime_known: bool
