"""The repository's one layout rule (the README's "Development" section), for the tests that walk the packages.

The construct, the package users import, sits at the root as ``sendonce_constructs/``, as the design card draws it.
Every other package lives in ``<part>/sendonce_<part>/``, whichever distribution ships it (``contract`` and
``producer`` ship their own; ``runtime``, ``ops`` and ``local`` ship in the root's; ``testing`` ships in none)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "sendonce_"
# The package at the root, and the parts that each have a folder of their own.
ROOT_PACKAGE = "sendonce_constructs"
PARTS = ("contract", "runtime", "producer", "ops", "local", "testing")
# The top level the design card names, and the folders and files the repository also keeps there.
CARD_TOP_LEVEL = {"pyproject.toml", "cdk.json", ROOT_PACKAGE, "runtime", "tests", "examples", "README.md"}


def package_folder(package: str) -> Path:
    """Where ``package`` (``sendonce_<part>``) keeps its code under the rule."""
    if package == ROOT_PACKAGE:
        return ROOT / ROOT_PACKAGE
    part = package.removeprefix(PREFIX)
    assert part in PARTS, f"{package} is not one of our packages"
    return ROOT / part / package


PACKAGES = {package: package_folder(package) for package in (ROOT_PACKAGE, *(PREFIX + part for part in PARTS))}
