"""Each prop given is of the type it is declared with (``queue_props``), checked before any rule reads it: a string
where a number belongs (a ``-c`` context value) or a number where a ``Duration`` belongs would otherwise fail deep
in a rule as a bare ``TypeError`` that names no prop.

Tokens pass: a number token is a float (also where an int is declared), a string token a str, a duration token a
``Duration``. A jsii interface (``IVpc``, ``ITable``...) is not checkable at run time, so only plain Python values
(strings, numbers, lists, mappings) are refused there.
"""

from __future__ import annotations

import enum
import types
from collections.abc import Mapping, Sequence
from typing import Union, get_args, get_origin

from aws_cdk import Duration, Token

from .errors import ID_PREFIX, SendOnceConfigurationError

_PLAIN = (str, bytes, int, float, bool, Sequence, Mapping, Duration)


def check_types(given: Mapping[str, object], declared: Mapping[str, object]) -> None:
    """``given`` props (None already dropped) against ``declared``'s types; the first mismatch raises, naming the
    prop, the value, the type and the fix."""
    for name, value in given.items():
        hint = declared[name]
        if not _matches(value, hint):
            raise SendOnceConfigurationError(
                f"{name} ({value!r}, {_kind(value)}) must be {_describe(hint)}; {_fix(name, value, hint)}",
                f"{ID_PREFIX}InvalidPropType")


def _members(hint: object) -> list[object]:
    if get_origin(hint) in (Union, types.UnionType):
        return [member for member in get_args(hint) if member is not type(None)]
    return [hint]


def _matches(value: object, hint: object) -> bool:
    return any(_matches_one(value, member) for member in _members(hint))


def _matches_one(value: object, hint: object) -> bool:
    origin = get_origin(hint)
    if origin is not None:  # Sequence[X]
        (item,) = get_args(hint)
        return (isinstance(value, Sequence) and not isinstance(value, str | bytes)
                and (Token.is_unresolved(value) or all(_matches(element, item) for element in value)))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and Token.is_unresolved(value))
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if _is_interface(hint):
        return not isinstance(value, _PLAIN)
    assert isinstance(hint, type)
    return isinstance(value, hint)


def _is_interface(hint: object) -> bool:
    return bool(getattr(hint, "_is_protocol", False))


def _kind(value: object) -> str:
    return _article(type(value).__name__)


def _article(name: str) -> str:
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"


def _name(hint: object) -> str:
    """``aws_lambda.Runtime`` for aws-cdk-lib's types, as a CDK app imports them; the bare name otherwise."""
    if get_origin(hint) is not None:
        (item,) = get_args(hint)
        return f"list of {_name(item)}"
    assert isinstance(hint, type)
    module = hint.__module__
    return f"{module.removeprefix('aws_cdk.')}.{hint.__qualname__}" if module.startswith("aws_cdk.") else (
        hint.__qualname__)


def _describe(hint: object) -> str:
    return " or ".join(_article(_name(member)) for member in _members(hint))


def _fix(name: str, value: object, hint: object) -> str:
    members = _members(hint)
    if isinstance(value, str) and (int in members or float in members):
        number = _number(value)
        if number is not None:
            return f"pass {name}={number!r} (a value from `cdk -c` is a string: convert it)"
    if isinstance(value, str) and bool in members:
        return f"pass {name}=True or False (a value from `cdk -c` is a string: compare it, e.g. == \"true\")"
    if Duration in members and isinstance(value, int | float) and not isinstance(value, bool):
        return f"pass {name}=Duration.seconds({value!r})"
    if isinstance(value, str) and any(get_origin(member) is not None for member in members):
        return f"pass a list: {name}=[{value!r}]"
    enums = [member for member in members if isinstance(member, type) and issubclass(member, enum.Enum)]
    if enums:
        return "pass one of " + ", ".join(f"{enums[0].__name__}.{member.name}" for member in enums[0])
    return f"pass {_describe(hint)}"


def _number(text: str) -> int | float | None:
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return None
