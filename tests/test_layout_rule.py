"""One layout rule for where a package's code lives (docs/development.md, "Development"): every package of
ours is ``<part>/sendonce_<part>/``, and the distributions build, install and check them from those folders."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "sendonce_"
SKIPPED = {"node_modules", "build", "dist", "cdk.out", "site", "__pycache__"}


def _top_level_packages() -> list[Path]:
    """Every folder named sendonce_* holding an ``__init__.py`` whose parent is not itself a package."""
    found = []
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if not name.startswith(".") and name not in SKIPPED]
        here = Path(folder)
        if here.name.startswith(PREFIX) and "__init__.py" in files and not (here.parent / "__init__.py").is_file():
            found.append(here)
            subfolders.clear()
    return sorted(found)


def _parts() -> set[str]:
    return {path.parent.name for path in _top_level_packages()}


def test_every_package_lives_in_its_part_folder_as_sendonce_part():
    packages = _top_level_packages()
    assert len(packages) >= 7  # contract, runtime, producer, constructs, ops, local, testing
    misplaced = [path.relative_to(ROOT).as_posix() for path in packages
                 if path.parent.parent != ROOT or path.name != f"{PREFIX}{path.parent.name}"]
    assert misplaced == [], "each package lives in <part>/sendonce_<part>/"


def test_nothing_named_sendonce_sits_at_the_repository_root():
    assert sorted(path.name for path in ROOT.iterdir() if path.name.startswith(PREFIX)) == []


def test_the_distributions_build_and_check_each_package_from_its_part_folder():
    root = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wheel = root["tool"]["hatch"]["build"]["targets"]["wheel"]
    shipped = wheel["packages"]
    assert all(package == f"{part}/{PREFIX}{part}" for package in shipped for part in [package.split("/")[0]])
    # The editable install puts exactly the shipped parts on the path: the checkout's code is what runs.
    assert sorted(wheel["dev-mode-dirs"]) == sorted(package.split("/")[0] for package in shipped)
    # The sdist carries each shipped part's folder, so its wheel is built from the same layout.
    sdist = root["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    assert {f"/{package.split('/')[0]}" for package in shipped} <= set(sdist)
    # Type checking covers every package, each from its folder.
    assert sorted(root["tool"]["mypy"]["files"]) == sorted(
        [*(path.relative_to(ROOT).as_posix() for path in _top_level_packages()), "tools"])
    # The contract and the producer are distributions of their own, each built from its part folder.
    for part in ("contract", "producer"):
        own = tomllib.loads((ROOT / part / "pyproject.toml").read_text(encoding="utf-8"))
        assert own["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == [f"{PREFIX}{part}"]
    assert _parts() == {*(package.split("/")[0] for package in shipped), "contract", "producer", "testing"}
