"""The resolved props (``sendonce_constructs/resolved_props.py``), rendered from the props' declarations
(``queue_props``), their derivations and the rules that parse a prop: mypy reads a real class, and nothing in it is
typed by hand. ``make props-docs`` rewrites it (``tools/reference_docs.py``); a test fails while it differs.
Repository tooling: it ships in no distribution.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
from collections.abc import Callable, Iterator

from sendonce_constructs import derivations, queue_props, rules
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


def render_resolved_props() -> str:
    """The source of ``resolved_props``."""
    fields = resolved_fields()
    used = {node.id for text in fields.values() for node in ast.walk(ast.parse(text, mode="eval"))
            if isinstance(node, ast.Name)}
    body = [f"    {name}: {kind}" for name, kind in fields.items()]
    return "\n".join([RESOLVED_DOC, "", "from __future__ import annotations", "", *_imports(used), "", "",
                      "@dataclass(frozen=True)", "class PipelineProps:",
                      RESOLVED_CLASS_DOC,
                      "", *body, ""])


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
    for source in (queue_props, derivations, rules):
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
