"""The bundled Lambda code: the installed ``sendonce_runtime`` and ``sendonce_contract`` packages, side by side.

Both are ordinary installed packages (from a wheel, or from the checkout in an editable install). A Lambda asset is
one folder, so their source files are staged together in a folder named by their content's hash: the same code
always gives the same folder, hence the same asset hash, and nothing is copied into the wheel at build time.

With ``bytecode`` (the ``precompiled_bytecode`` prop) the folder also holds each module's bytecode, compiled by this
interpreter: Lambda's asset folder is read-only, so without it Python compiles every module at each cold start. The
bytecode is hash-based (PEP 552: checked against the source's hash, not its mtime, which a zip does not keep) and
names each file by its path in the asset, so the same code and interpreter give the same bytes.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from sendonce_runtime.entry_points import (
    HANDLER,
    OUTCOME_HANDLER,
    QUOTA_WATCH_HANDLER,
    RECORDER_HANDLER,
    RELAY_HANDLER,
    SCHEDULE_WATCH_HANDLER,
)

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

__all__ = [
    "HANDLER",
    "OUTCOME_HANDLER",
    "QUOTA_WATCH_HANDLER",
    "RECORDER_HANDLER",
    "RELAY_HANDLER",
    "SCHEDULE_WATCH_HANDLER",
    "bundle_files",
    "package_dir",
    "runtime_asset_dir",
    "runtime_code",
]

PACKAGES = ("sendonce_runtime", "sendonce_contract")
SHIPPED_SUFFIXES = (".py", ".json")  # code and the message's JSON Schema; no bytecode, no typing markers


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the package {name} that the bundled Lambda code needs is not installed; "
                                "reinstall sendonce")
    return Path(next(iter(spec.submodule_search_locations)))


def bundle_files() -> list[tuple[str, Path]]:
    """(path inside the asset, source file), in a stable order."""
    files = []
    for name in PACKAGES:
        root = package_dir(name)
        files += [(f"{name}/{path.relative_to(root).as_posix()}", path) for path in sorted(root.rglob("*"))
                  if path.suffix in SHIPPED_SUFFIXES and path.is_file() and "__pycache__" not in path.parts]
    return files


def runtime_asset_dir(bytecode: bool = False) -> Path:
    """A folder holding exactly the bundled packages (with this interpreter's bytecode if asked), made once per
    content."""
    files = bundle_files()
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    flavour = f"-{sys.implementation.cache_tag}" if bytecode else ""
    target = Path(tempfile.gettempdir()) / f"sendonce-lambda-{digest.hexdigest()[:20]}{flavour}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=".sendonce-lambda-", dir=target.parent))
    for name, path in files:
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, staging / name)
        if bytecode and name.endswith(".py"):
            _compile(staging, name)
    try:
        os.rename(staging, target)  # atomic: a folder under the final name is always complete
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)  # another process staged the same content first
    return target


def _compile(folder: Path, name: str) -> None:
    source = folder / name
    py_compile.compile(str(source), cfile=importlib.util.cache_from_source(str(source)), dfile=name, doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


def runtime_code(bytecode: bool = False) -> lambda_.Code:
    from aws_cdk import aws_lambda as lambda_

    return lambda_.Code.from_asset(str(runtime_asset_dir(bytecode)))
