"""A prop's value as a synth-time rule sees it: known, absent (``None``), or ``UNRESOLVED``: a token CDK resolves
only at deploy time, which no rule can check, so the rule skips it rather than guess.

CDK-free, as the rules are; ``props`` reads the values (``read``, ``read_seconds``).
"""

from __future__ import annotations

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
