"""The pipeline's props, resolved once, in one pass: the props given checked against their declarations
(``queue_props``), the declared defaults filled in and the derived ones computed (``derivations``), every value read
once as the rules see it (``readings``), and every rule run from its registry (``rules.RULES``), before anything is
built.

A derivation reads the props as built so far (``PipelineProps``' fields; one not derived yet fails), a rule reads
them all as the rules see them (``PropReadings``); both know which were given (``given``). Values that are
unresolved tokens keep their place; the rules see them as ``UNRESOLVED`` and skip what would need them (see
``rules``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, cast

from . import derivations
from .errors import ID_PREFIX, SendOnceConfigurationError
from .prop_readings import PropReadings
from .prop_types import check_types
from .queue_props import REQUIRED, Derived, Prop, declared_props, declared_types, prop_text
from .readings import known, read, read_seconds, reading, seconds
from .resolved_props import PipelineProps
from .rules import RULES

__all__ = ["PipelineProps", "check_declared", "known", "newest_python_runtime", "read", "read_seconds",
           "resolve_props", "seconds"]

newest_python_runtime = derivations.newest_python_runtime


def resolve_props(given: Mapping[str, object], path: str) -> PipelineProps:
    """The props given (``SendOnceEmailQueueProps``; None is the same as absent) with the declared defaults filled
    in, the derived ones computed and every rule applied; an error names the construct at ``path``."""
    try:
        return _resolve({name: value for name, value in given.items() if value is not None})
    except SendOnceConfigurationError as error:
        raise error.at(path) from None


def _resolve(given: Mapping[str, Any]) -> PipelineProps:
    declared = declared_props()
    check_declared(given, declared)
    check_types(given, declared_types())
    names_given = frozenset(given)
    built = _built(given, declared, names_given)
    # Each value read once; the facts are found already as the rules see them.
    read_once: dict[str, Any] = {name: reading(name, value) if name in declared else value
                                 for name, value in built.items()}
    readings = PropReadings(given=names_given, **read_once)
    for rule in RULES:
        result = rule.check(readings)
        if rule.builds is not None:
            built[rule.builds] = result
    return PipelineProps(given=names_given, **built)


def _built(given: Mapping[str, Any], declared: Mapping[str, Prop], names_given: frozenset[str]) -> dict[str, Any]:
    """Every prop's value as built (given, declared default, or derived, in declaration order), then the facts."""
    values = {name: given.get(name, prop.default) for name, prop in declared.items()
              if name in given or not isinstance(prop.default, Derived)}
    so_far = cast(PipelineProps, _PropsSoFar(values, names_given))
    for name, prop in declared.items():
        if name not in given and isinstance(prop.default, Derived):
            values[name] = prop.default.compute(so_far)
    for fact in derivations.FACTS:
        values[fact.__name__] = fact(so_far)
    return {name: values[name] for name in [*declared, *(fact.__name__ for fact in derivations.FACTS)]}


class _PropsSoFar:
    """The props built so far, read as ``PipelineProps``' fields are, by a derivation: one not derived yet fails
    (derived props are computed in declaration order)."""

    def __init__(self, values: Mapping[str, Any], given: frozenset[str]) -> None:
        self._values, self.given = values, given

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"{name} is read before it is derived (derived props are computed in the order "
                                 "queue_props declares them)") from None


def check_declared(given: Mapping[str, object], declared: Mapping[str, Prop]) -> None:
    """Every prop given is declared (a typo is an error, not a prop silently ignored); every required one given."""
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, declared, n=1)
            hint = f"did you mean {close[0]}?" if close else "see the props reference (https://sendonce.github.io/sendonce/reference/props/)"
            raise SendOnceConfigurationError(f"{name} is not a prop of SendOnceEmailQueue; {hint}",
                                             f"{ID_PREFIX}UnknownProp")
    for name, prop in declared.items():
        if prop.default is REQUIRED and name not in given:
            raise SendOnceConfigurationError(f"{name} is required: {prop_text(name)}", f"{ID_PREFIX}MissingProp")
