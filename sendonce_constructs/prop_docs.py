"""The construct's docstring and the README's prop table, rendered from the props' declarations (``queue_props``).

``make props-docs`` (``python -m sendonce_constructs.prop_docs``) rewrites both in a checkout; a test fails when
either differs from what this renders.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

from .queue_props import declared_props

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


def main(root: Path) -> None:
    readme, module = root / "README.md", root / "sendonce_constructs" / "email_queue.py"
    readme.write_text(rewrite_readme(readme.read_text(encoding="utf-8")), encoding="utf-8")
    module.write_text(rewrite_module(module.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
