"""The one layout rule (tests/layout.py, the README's "Development" section): the construct at the root as the
design card draws it, every other package in ``<part>/sendonce_<part>/``, and the distributions building,
installing and checking each from there."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from layout import CARD_TOP_LEVEL, PACKAGES, PARTS, PREFIX, ROOT, ROOT_PACKAGE

SKIPPED = {"node_modules", "build", "dist", "cdk.out", "site", "__pycache__"}


def _top_level_packages() -> set[Path]:
    """Every folder named sendonce_* holding an ``__init__.py`` whose parent is not itself a package."""
    found = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if not name.startswith(".") and name not in SKIPPED]
        here = Path(folder)
        if here.name.startswith(PREFIX) and "__init__.py" in files and not (here.parent / "__init__.py").is_file():
            found.add(here)
            subfolders.clear()
    return found


def test_every_package_is_where_the_rule_puts_it():
    assert _top_level_packages() == set(PACKAGES.values())
    assert all(folder.is_dir() for folder in PACKAGES.values())


def test_the_root_holds_the_design_cards_top_level_and_only_the_construct_of_our_packages():
    top_level = {path.name for path in ROOT.iterdir()}
    assert top_level >= CARD_TOP_LEVEL
    assert sorted(name for name in top_level if name.startswith(PREFIX)) == [ROOT_PACKAGE]


def test_no_root_folder_is_named_like_a_dependency():
    """A root folder named like an installed package (CDK's ``constructs``) would shadow it on pytest's path."""
    dependencies = {"constructs", "aws_cdk", "boto3", "botocore", "moto", "jsii", "cdk_nag", "hypothesis", "pytest"}
    assert sorted(path.name for path in ROOT.iterdir() if path.is_dir() and path.name in dependencies) == []


def test_the_distributions_build_and_check_each_package_from_its_folder():
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = root["tool"]["hatch"]["build"]["targets"]["wheel"]
    shipped = {ROOT / package for package in wheel["packages"]}
    in_the_root_distribution = (ROOT_PACKAGE, *(PREFIX + part for part in ("runtime", "ops", "local")))
    assert shipped == {PACKAGES[package] for package in in_the_root_distribution}
    # The editable install puts exactly each shipped package's parent folder on the path: the checkout's code runs.
    assert {(ROOT / folder).resolve() for folder in wheel["dev-mode-dirs"]} == {path.parent for path in shipped}
    # The sdist carries each shipped package, so its wheel is built from the same layout.
    sdist = root["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert {"/" + path.relative_to(ROOT).parts[0] for path in shipped} <= set(sdist)
    # Type checking covers every package, each from its folder.
    assert sorted(root["tool"]["mypy"]["files"]) == sorted(
        [*(path.relative_to(ROOT).as_posix() for path in PACKAGES.values()), "tools"])
    # The contract and the producer are distributions of their own, each built from its part folder.
    for part in ("contract", "producer"):
        own = tomllib.loads((ROOT / part / "pyproject.toml").read_text(encoding="utf-8"))
        assert own["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [f"{PREFIX}{part}"]
    assert set(PARTS) == {path.parent.name for path in PACKAGES.values() if path.parent != ROOT}
