"""The construct's docstring, the README's prop table and the resolved props (``resolved_props.PipelineProps``),
rendered from the props' declarations (``queue_props``).

``make props-docs`` (``python -m sendonce_constructs.prop_docs``) rewrites all three in a checkout; a test fails when
any differs from what this renders.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

from . import derivations, queue_props, rules
from .queue_props import Derived, declared_props

TABLE_START = "<!-- props: generated from sendonce_constructs/queue_props.py by `make props-docs` -->"
TABLE_END = "<!-- end of props -->"
TABLE_HEADER = "| prop | default | rule checked at synth |\n| --- | --- | --- |"
DOCSTRING_INDENT = " " * 4
DOCSTRING_WIDTH = 116
# The docstring's :param lines are the end of the class docstring, from the first one to its closing quotes.
_PARAMS = re.compile(r'(?ms)^    :param sender:.*?(?=^    """)')


def _rst(text: str) -> str:
    # The README's Markdown code spans become reStructuredText literals (already doubled ones are kept).
    return re.sub(r"(?<!`)`([^`]+)`(?!`)", r"``\1``", text)


def render_table() -> str:
    """The README's prop table, between its markers."""
    rows = [f"| `{name}` | {prop.default_doc} | {prop.rule}".rstrip() + " |" for name, prop in declared_props().items()]
    return "\n".join([TABLE_START, "", TABLE_HEADER, *rows, "", TABLE_END])


def render_docstring_params() -> str:
    """The ``:param`` lines of ``SendOnceEmailQueue``'s docstring, indented as they sit in the class."""
    lines: list[str] = []
    for name, prop in declared_props().items():
        default = prop.default_doc[0].upper() + prop.default_doc[1:]
        text = f":param {name}: {prop.doc} " + (f"{default}." if prop.default_doc == "required"
                                                 else f"Default: {_rst(prop.default_doc)}.")
        lines += textwrap.wrap(text, DOCSTRING_WIDTH, initial_indent=DOCSTRING_INDENT,
                               subsequent_indent=DOCSTRING_INDENT * 2, break_on_hyphens=False,
                               break_long_words=False)
    return "\n".join(lines) + "\n"


def rewrite_readme(readme: str) -> str:
    start, end = readme.index(TABLE_START), readme.index(TABLE_END) + len(TABLE_END)
    return readme[:start] + render_table() + readme[end:]


def rewrite_module(source: str) -> str:
    rewritten, count = _PARAMS.subn(lambda _: render_docstring_params(), source, count=1)
    if count != 1:
        raise LookupError("no ':param sender:' block found in the construct's docstring")
    return rewritten


def docstring_params(source: str) -> str:
    """The ``:param`` block as it stands in the construct's module source."""
    match = _PARAMS.search(source)
    return match.group(0) if match else ""


def table_in(readme: str) -> str:
    """The prop table as it stands in the README, markers included."""
    start, end = readme.find(TABLE_START), readme.find(TABLE_END)
    return readme[start:end + len(TABLE_END)] if 0 <= start < end else ""


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


def main(root: Path) -> None:
    readme, module = root / "README.md", root / "sendonce_constructs" / "email_queue.py"
    readme.write_text(rewrite_readme(readme.read_text(encoding="utf-8")), encoding="utf-8")
    module.write_text(rewrite_module(module.read_text(encoding="utf-8")), encoding="utf-8")
    resolved = root / "sendonce_constructs" / "resolved_props.py"
    resolved.write_text(render_resolved_props(), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
