"""The pipeline's props, resolved once, in one pass: the props given checked against their declarations
(``queue_props``), the declared defaults filled in and the derived ones computed (``derivations``), every value read
once as the rules see it (``readings``), and every rule run from its registry (``rules.RULES``), before anything is
built.

Rules and derivations name what they read by their parameters and get exactly that: a prop's name for its value as
built, ``<prop>_given`` for its value as given (None when absent), a fact's name for the fact.
Values that are unresolved tokens keep their place; the rules see them as ``UNRESOLVED`` and skip what would need
them (see ``rules``).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from . import derivations
from .errors import ID_PREFIX, SendOnceConfigurationError
from .prop_types import check_types
from .queue_props import REQUIRED, Derived, Prop, declared_props, declared_types
from .readings import known, read, read_seconds, reading, seconds
from .resolved_props import PipelineProps
from .rules import RULES

__all__ = ["GIVEN", "PipelineProps", "check_declared", "known", "newest_python_runtime", "read", "read_seconds",
           "resolve_props", "seconds"]

GIVEN = "_given"  # the suffix of a parameter that reads a prop's value as given
newest_python_runtime = derivations.runtime


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
    values = _with_defaults(given, declared)
    # Each value read once; as given, a prop reads the same as built (a default fills only what is absent).
    seen = {name: reading(name, value) for name, value in values.items() if name in declared}
    seen |= {name + GIVEN: seen[name] if name in given else None for name in declared}
    seen |= {fact.__name__: values[fact.__name__] for fact in derivations.FACTS}  # already as the rules see them
    built = dict(values)
    for rule in RULES:
        result = rule.check(**{name: seen[name] for name in rule.reads})
        if rule.builds is not None:
            built[rule.builds] = result
    return PipelineProps(**built)


def _with_defaults(given: Mapping[str, Any], declared: Mapping[str, Prop]) -> dict[str, Any]:
    """Every prop's value as built (given, declared default, or derived), then the facts."""
    values = {name: given.get(name, prop.default) for name, prop in declared.items()
              if not isinstance(prop.default, Derived)}
    values |= {name + GIVEN: given.get(name) for name in declared}
    for name, prop in declared.items():
        if isinstance(prop.default, Derived):
            values[name] = given[name] if name in given else _call(prop.default.compute, values)
    for fact in derivations.FACTS:
        values[fact.__name__] = _call(fact, values)
    return {name: value for name, value in values.items() if not name.endswith(GIVEN)}


def _call(compute: Callable[..., object], values: Mapping[str, object]) -> object:
    """``compute`` called with the values its parameters name."""
    return compute(**{name: values[name] for name in inspect.signature(compute).parameters})


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
            raise SendOnceConfigurationError(f"{name} is required: {prop.doc}", f"{ID_PREFIX}MissingProp")
