"""The packages' imports run one way (the README's "Development" section draws it): no package imports one drawn
above it, so there is no circle; the operator command and the local tooling never load aws-cdk-lib."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from layout import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
# Each package, where its code is, and which of our packages it may import.
LAYERS = {
    "sendonce_contract": (PACKAGES["sendonce_contract"], set()),
    "sendonce_runtime": (PACKAGES["sendonce_runtime"], {"sendonce_contract"}),
    "sendonce_producer": (PACKAGES["sendonce_producer"], {"sendonce_contract"}),
    "sendonce_constructs": (PACKAGES["sendonce_constructs"], {"sendonce_contract", "sendonce_runtime"}),
    "sendonce_ops": (PACKAGES["sendonce_ops"], {"sendonce_contract"}),
    "sendonce_local": (PACKAGES["sendonce_local"], {"sendonce_contract", "sendonce_runtime", "sendonce_producer",
                                                  "sendonce_ops"}),
}
OURS = {*LAYERS, "sendonce_testing"}
WITHOUT_CDK = ("sendonce_contract", "sendonce_runtime", "sendonce_producer", "sendonce_ops", "sendonce_local")


def imported(package_dir: Path) -> dict[str, set[str]]:
    """Top-level packages each module imports, anywhere in it (a lazy import inside a function counts too)."""
    found: dict[str, set[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[path.relative_to(ROOT).as_posix()] = names
    return found


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_package_imports_only_the_packages_drawn_below_it(package):
    package_dir, allowed = LAYERS[package]
    wrong = {module: sorted(names & OURS - allowed - {package}) for module, names in imported(package_dir).items()}
    assert {module: names for module, names in wrong.items() if names} == {}


@pytest.mark.parametrize("package", WITHOUT_CDK)
def test_a_package_that_does_not_synthesize_never_imports_aws_cdk_lib(package):
    package_dir, _ = LAYERS[package]
    loading = {module for module, names in imported(package_dir).items() if names & {"aws_cdk", "constructs", "jsii"}}
    assert loading == set()


def test_the_commands_start_without_loading_aws_cdk_lib_or_the_construct():
    probe = ("import sys, sendonce_ops.cli, sendonce_local.cli, sendonce_local.demo.run, sendonce_local.cli.run; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'aws_cdk', 'jsii', 'sendonce_constructs'}))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
