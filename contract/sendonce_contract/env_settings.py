"""A bundled function's config declared once: each field of a config names its environment variable and its codec
in its annotation (``Annotated[int, Var(Env.X, INTEGER)]``), and writing and reading the environment are derived
from those declarations (:func:`to_env`, :func:`from_env`), so a setting is never spelled again by hand.

No dependency: the Lambda bundle ships this module.
"""

from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class ConfigError(RuntimeError):
    """A function's environment is incomplete or malformed: a deployment error, not a message error."""


class Codec(NamedTuple):
    """How one setting's value is written to its variable and read back (a ``ValueError`` names bad text)."""

    encode: Callable[[Any], str]
    decode: Callable[[str], Any]


def flag(value: bool) -> str:
    return "true" if value else "false"


TEXT = Codec(str, str)
INTEGER = Codec(lambda value: str(int(value)), int)
NUMBER = Codec(lambda value: f"{value:g}", float)
FLAG = Codec(flag, lambda text: text.lower() == "true")
# A flag written only when on: a function deployed before it existed reads the same as one with it off.
FLAG_WHEN_ON = Codec(flag, FLAG.decode)


class Var(NamedTuple):
    """A field's environment variable and codec. A required one must be set; an unset (or, unless ``reads_empty``,
    empty) optional one reads as the field's default."""

    name: str
    codec: Codec
    required: bool = False
    # An empty value is a value (an allow list must never read as "no list", which would allow every recipient).
    reads_empty: bool = False


class Nested(NamedTuple):
    """A field holding a config of its own, whose variables are written beside the outer ones; it reads as None when
    none of them is set."""

    config: type


def settings(config_type: type) -> Iterator[tuple[str, Var | Nested]]:
    """Each declared field of a config class and its declaration, in field order."""
    for field, annotation in config_type.__annotations__.items():
        for declaration in getattr(annotation, "__metadata__", ()):
            if isinstance(declaration, Var | Nested):
                yield field, declaration


def to_env(config: Any) -> dict[str, str]:
    """The environment that says ``config``: every set field through its codec; None and off flags left out."""
    env: dict[str, str] = {}
    for field, declaration in settings(type(config)):
        value = getattr(config, field)
        if value is None:
            continue
        if isinstance(declaration, Nested):
            env.update(to_env(value))
        elif value or declaration.codec is not FLAG_WHEN_ON:
            env[declaration.name] = declaration.codec.encode(value)
    return env


def from_env(config_type: type[T], env: Mapping[str, str]) -> T:
    """The config ``env`` says: one error naming every required variable missing, or the one that is malformed."""
    declared = list(settings(config_type))
    require(env, *(d.name for _, d in declared if isinstance(d, Var) and d.required))
    defaults: dict[str, Any] = getattr(config_type, "_field_defaults", {})
    values: dict[str, Any] = {}
    for field, declaration in declared:
        if isinstance(declaration, Nested):
            inner = dict(settings(declaration.config)).values()
            if any(env.get(var.name) for var in inner if isinstance(var, Var)):
                values[field] = from_env(declaration.config, env)
            continue
        text = env.get(declaration.name)
        if text or (text is not None and declaration.reads_empty):
            values[field] = read(declaration.name, text, declaration.codec.decode)
        elif field in defaults:
            values[field] = defaults[field]
    return config_type(**values)


def read(name: str, text: str, parse: Callable[[str], T]) -> T:
    """``text`` parsed, or one error naming the variable and what it held."""
    try:
        return parse(text)
    except ValueError as error:
        raise ConfigError(f"invalid sendonce setting: {error} (in {name}={text!r})") from error


def require(env: Mapping[str, str], *names: str) -> None:
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise ConfigError(f"environment variables {', '.join(missing)} are not set; deploy with the construct")
