"""The resolved props (``sendonce_constructs/resolved_props.py``), rendered from the props' declarations
(``queue_props``), their derivations and the rules that parse a prop: mypy reads a real class, and nothing in it is
typed by hand. ``make props-docs`` rewrites it (``tools/reference_docs.py``); a test fails while it differs.
Repository tooling: it ships in no distribution.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterator

from sendonce_constructs import derivations, queue_props, readings, rules, unresolved
from sendonce_constructs.queue_props import Derived, declared_props

RESOLVED_DOC = '''"""The props of ``SendOnceEmailQueue`` as the pipeline is built with them: every prop declared in
``queue_props``, with its default filled in or derived and the rules checked, then the facts found besides them
(``derivations.FACTS``).

Rendered from the declarations by ``make props-docs``: edit those, not this (a test fails while they differ). A
prop's type is its declared type, without None when it has a default; a derived prop's, its derivation's return
type; a prop a rule parses, that rule's return type.
"""'''


RESOLVED_CLASS_DOC = ('    """Every prop of ``SendOnceEmailQueue`` as built, and the facts found '
                      '(``props.resolve_props``)."""')
GIVEN_FIELD = ("    given: frozenset[str]  # the names of the props given (the rest took their default or derivation)")

READINGS_DOC = '''"""The props of ``SendOnceEmailQueue`` as the rules see them (``rules``): each value read once by
``readings`` (a duration in seconds, a number or a name that is a token as ``UNRESOLVED``, a CDK object a rule
weighs as plain facts, any other CDK object as it is), then the facts found besides them (``derivations.FACTS``).

Rendered from the declarations by ``make props-docs``: edit those, not this (a test fails while they differ). CDK-free,
as the rules are.
"""'''

READINGS_CLASS_DOC = ('    """Every prop as a rule reads it (``readings.reading``), by name, and the facts; '
                      '``given`` names the props given."""')
# What a prop of each built type reads as (``readings.reading``); a type naming a CDK module is read as it is.
_READ_AS = {"Duration": "Number", "int": "Number", "float": "Number", "str": "str | Unresolved"}
_CDK_NAMES = re.compile(r"\b(?:Duration|RemovalPolicy|[a-z0-9_]+\.[A-Z]\w*)\b")


def resolved_fields() -> dict[str, str]:
    """Each field of the resolved props and its type, as source text."""
    declared, given = declared_props(), _declared_annotations()
    built_by_rule = {rule.builds: rule.check for rule in rules.RULES if rule.builds is not None}
    fields: dict[str, str] = {}
    for name, prop in declared.items():
        if name in built_by_rule:
            fields[name] = _returns(built_by_rule[name])
        elif isinstance(prop.default, Derived):
            fields[name] = _returns(prop.default.compute)
        else:
            fields[name] = _without_none(given[name]) if prop.default is not None else ast.unparse(given[name])
    for fact in derivations.FACTS:
        fields[fact.__name__] = _returns(fact)
    return fields


def reads(compute: Callable[..., object]) -> list[str]:
    """What a rule or a derivation reads, in the order its source first names them: ``x`` for ``p.x``, and
    ``x (given)`` for a test of whether ``x`` was given (``"x" in p.given``, or a name in it that a comprehension
    takes from a tuple of props). ``check_ranges`` reads the range table's props."""
    if compute is rules.check_ranges:
        return [row.prop + (" (given)" if row.given_only else "") for row in rules.RANGES]
    source = textwrap.dedent(inspect.getsource(inspect.unwrap(compute)))
    tree = ast.parse(source)
    taken = {generator.target.id: [str(element.value) for element in generator.iter.elts
                                   if isinstance(element, ast.Constant)]
             for generator in ast.walk(tree) if isinstance(generator, ast.comprehension)
             and isinstance(generator.target, ast.Name) and isinstance(generator.iter, ast.Tuple)}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "p" \
                and node.attr != "given":
            found.append(node.attr)
        if isinstance(node, ast.Compare) and any(ast.unparse(side) == "p.given" for side in node.comparators):
            if isinstance(node.left, ast.Constant):
                found.append(f"{node.left.value!s} (given)")
            elif isinstance(node.left, ast.Name):
                found += [f"{name} (given)" for name in taken.get(node.left.id, [])]
    return sorted(set(found), key=lambda name: (source.find(name.split()[0]), name))


def render_resolved_props() -> str:
    """The source of ``resolved_props``."""
    return _module(RESOLVED_DOC, "PipelineProps", RESOLVED_CLASS_DOC, resolved_fields())


def reading_fields() -> dict[str, str]:
    """Each field of the readings and its type, as source text: a prop's reading, then the facts (already read)."""
    declared, built, given = declared_props(), resolved_fields(), _declared_annotations()
    parsed = {rule.builds for rule in rules.RULES if rule.builds is not None}
    fields: dict[str, str] = {}
    for name, prop in declared.items():
        kind = ast.unparse(given[name]) if name in parsed else built[name]
        optional = prop.default is None or " | None" in kind
        reader, bare = readings.READERS.get(name), _without_none(ast.parse(kind, mode="eval").body)
        if reader is not None:
            kind = _returns(reader)
        elif bare in _READ_AS:
            kind = _READ_AS[bare]
        elif _CDK_NAMES.search(kind):
            kind = "object"
        fields[name] = kind + " | None" if optional and kind not in ("Number", "object") and "None" not in kind \
            else kind
    for fact in derivations.FACTS:
        fields[fact.__name__] = built[fact.__name__]
    return fields


def render_prop_readings() -> str:
    """The source of ``prop_readings``."""
    return _module(READINGS_DOC, "PropReadings", READINGS_CLASS_DOC, reading_fields())


def _module(doc: str, name: str, class_doc: str, fields: dict[str, str]) -> str:
    used = {node.id for text in fields.values() for node in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(node, ast.Name)}
    body = [f"    {field}: {kind}" for field, kind in fields.items()]
    return "\n".join([doc, "", "from __future__ import annotations", "", *_imports(used), "", "",
                      "@dataclass(frozen=True)", f"class {name}:", class_doc, "", GIVEN_FIELD, *body, ""])


def _returns(compute: Callable[..., object]) -> str:
    annotation = inspect.signature(compute).return_annotation
    assert isinstance(annotation, str), f"{compute.__name__}: postponed annotations expected"
    return annotation


def _declared_annotations() -> dict[str, ast.expr]:
    """Each prop's declared type as written in ``queue_props`` (``Required`` and ``Annotated`` taken off)."""
    tree = ast.parse(inspect.getsource(queue_props))
    [props] = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "SendOnceEmailQueueProps"]
    found: dict[str, ast.expr] = {}
    for statement in props.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            hint = statement.annotation
            while isinstance(hint, ast.Subscript) and isinstance(hint.value, ast.Name) and hint.value.id in (
                    "Required", "Annotated"):
                hint = hint.slice.elts[0] if isinstance(hint.slice, ast.Tuple) else hint.slice
            found[statement.target.id] = hint
    return found


def _members(hint: ast.expr) -> Iterator[ast.expr]:
    if isinstance(hint, ast.BinOp) and isinstance(hint.op, ast.BitOr):
        yield from _members(hint.left)
        yield from _members(hint.right)
    else:
        yield hint


def _without_none(hint: ast.expr) -> str:
    return " | ".join(ast.unparse(member) for member in _members(hint)
                      if not (isinstance(member, ast.Constant) and member.value is None))


# Where the names the field types use come from, and in which of isort's sections they sit.
_SECTIONS = ("__future__", "stdlib", "third-party", "first-party", "local")


def _imports(used: set[str]) -> list[str]:
    """The import lines of the names ``used``, taken from the modules whose annotations the fields copy."""
    sources: dict[str, tuple[str, str, str | None]] = {}  # bound name -> (module, name, alias)
    for source in (queue_props, derivations, rules, readings, unresolved):
        for node in ast.parse(inspect.getsource(source)).body:
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                origin = "." * node.level + (node.module or "")
                for alias in node.names:
                    sources.setdefault(alias.asname or alias.name, (origin, alias.name, alias.asname))
    needed = {("dataclasses", "dataclass", None)} | {sources[name] for name in used if name not in vars(builtins)}
    lines: list[str] = []
    for section in _SECTIONS[1:]:
        modules = sorted({module for module, _, _ in needed if _section(module) == section})
        if lines and modules:
            lines.append("")
        for module in modules:
            plain = sorted((name for m, name, alias in needed if m == module and alias is None), key=_member_order)
            if plain:
                lines.append(f"from {module} import {', '.join(plain)}")
            lines += sorted(f"from {module} import {name} as {alias}" for m, name, alias in needed
                            if m == module and alias is not None)
    return lines


def _section(module: str) -> str:
    if module.startswith("."):
        return "local"
    root = module.split(".")[0]
    if root in sys.stdlib_module_names:
        return "stdlib"
    return "first-party" if root.startswith("sendonce_") else "third-party"


def _member_order(name: str) -> tuple[int, str]:
    # isort's order by type: CONSTANTS, then Classes, then functions.
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)
