"""The local tooling is laid out as what it plays (the README's "Development" section): the emulator at the bottom,
the Lambda service on it, the demo on both, the command on top; no module imports one drawn above it, no two
modules import each other by any route, and no module is too long to read at once."""

from __future__ import annotations

import ast
from pathlib import Path

from layout import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = PACKAGES["sendonce_local"]
MAX_LINES = 300
# Each subpackage and the subpackages it may import.
LAYERS = {
    "emulator": set(),
    "databases": set(),  # the application's own databases (a real PostgreSQL), beside the emulator
    "lambda_service": {"emulator"},
    "demo": {"emulator", "databases", "lambda_service"},
    "cli": {"emulator", "databases", "lambda_service", "demo"},
}


def _modules() -> dict[str, Path]:
    """``sendonce_local.x.y`` -> its file, for every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of sendonce_local that ``name`` imports, anywhere in it (a lazy import counts too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {target for target in targets if target in modules and target != name}
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_module_of_the_local_tooling_is_over_300_lines():
    long = {path.relative_to(ROOT).as_posix(): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_every_module_lives_in_the_subpackage_of_what_it_plays():
    loose = sorted(name for name in _modules() if _layer(name) is None
                   and name not in ("sendonce_local", "sendonce_local.__main__"))
    assert loose == []


def test_a_subpackage_imports_only_the_subpackages_drawn_below_it():
    wrong = {}
    for module, imported in _graph().items():
        layer = _layer(module)
        allowed = LAYERS.get(layer, set(LAYERS)) | {layer}
        upward = sorted(target for target in imported if _layer(target) not in allowed)
        if layer is not None and upward:
            wrong[module] = upward
    assert wrong == {}


def test_no_two_modules_import_each_other_by_any_route():
    graph = _graph()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str, route: list[str]) -> None:
        if module in route:
            cycles.append([*route[route.index(module):], module])
            return
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*route, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert cycles == []
