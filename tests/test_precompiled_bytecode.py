"""precompiled_bytecode: the asset carries the bytecode Lambda's interpreter reads, so a cold start compiles nothing.

Lambda's asset folder is read-only, so without it Python compiles every module at each cold start; how much that
costs is bench section 3. Here: what the synthesized asset holds, that an interpreter of the runtime's version
imports every bundled handler from it without compiling a line, that the same code gives the same bytes (the asset
hash must not change from one synth to the next), and that a runtime of another version fails synth with the fix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from sendonce_constructs import SendOnceConfigurationError, SendOnceEmailQueue
from sendonce_constructs.runtime_asset import (
    HANDLER,
    OUTCOME_HANDLER,
    QUOTA_WATCH_HANDLER,
    RECORDER_HANDLER,
    RELAY_HANDLER,
    runtime_asset_dir,
)

THIS_PYTHON = getattr(lambda_.Runtime, f"PYTHON_{sys.version_info.major}_{sys.version_info.minor}")
HANDLERS = (HANDLER, RECORDER_HANDLER, RELAY_HANDLER, OUTCOME_HANDLER, QUOTA_WATCH_HANDLER)

# Run in a fresh interpreter on the asset alone: counts the modules the import system compiled from source.
COUNT_COMPILED = """
import json, sys, _frozen_importlib_external as loading
compiled = []
to_code = loading.SourceLoader.source_to_code
def counting(self, data, path, *args, **kwargs):
    compiled.append(path)
    return to_code(self, data, path, *args, **kwargs)
loading.SourceLoader.source_to_code = counting
import importlib
for handler in sys.argv[1:]:
    importlib.import_module(handler.rsplit(".", 1)[0])
print(json.dumps([path for path in compiled if "sendonce_" in path]))
"""


def synthesized_code_folders(tmp_path: Path, **props: object) -> set[Path]:
    """The folders of the Lambda code assets in the cloud assembly of a stack with one pipeline."""
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(app, "Test")
    SendOnceEmailQueue(stack, "Receipts", sender="example.com", outbox=True, ses_events=True, **props)
    assembly = app.synth()
    manifest = json.loads(Path(assembly.directory, "Test.assets.json").read_text())
    return {Path(assembly.directory, asset["source"]["path"]) for asset in manifest["files"].values()
            if asset["source"].get("packaging") == "zip"}


def compiled_on_import(folder: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1"}
    output = subprocess.run([sys.executable, "-c", COUNT_COMPILED, *HANDLERS], env=env, cwd="/", text=True,
                            capture_output=True, check=True).stdout
    return list(json.loads(output.strip().splitlines()[-1]))


def test_the_asset_holds_hash_checked_bytecode_for_every_module_and_nothing_compiles_at_import(tmp_path):
    [folder] = synthesized_code_folders(tmp_path, runtime=THIS_PYTHON, precompiled_bytecode=True)
    sources = sorted(folder.rglob("*.py"))
    assert len(sources) > 20
    for source in sources:
        cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        header = cached.read_bytes()[:16]
        flags = int.from_bytes(header[4:8], "little")
        assert flags == 0b11, f"{cached.name} is not a checked hash-based pyc (PEP 552): a zip keeps no mtime"
    assert compiled_on_import(folder) == []


def test_without_the_prop_the_asset_is_source_only_and_each_cold_start_compiles_it(tmp_path):
    [folder] = synthesized_code_folders(tmp_path)
    assert not list(folder.rglob("*.pyc"))
    assert len(compiled_on_import(folder)) > 20


def test_the_same_code_gives_the_same_bytecode_so_the_asset_hash_holds(tmp_path):
    def build_in_fresh_process(temp: Path) -> dict[str, str]:
        temp.mkdir()
        script = ("import hashlib, json; from sendonce_constructs.runtime_asset import runtime_asset_dir; "
                  "folder = runtime_asset_dir(bytecode=True); "
                  "print(json.dumps({str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() "
                  "for p in sorted(folder.rglob('*')) if p.is_file()}))")
        output = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(temp)},
                                text=True, capture_output=True, check=True).stdout
        return dict(json.loads(output.strip().splitlines()[-1]))

    first, second = build_in_fresh_process(tmp_path / "one"), build_in_fresh_process(tmp_path / "two")
    assert any(name.endswith(".pyc") for name in first)
    assert first == second


def test_the_bytecode_names_files_by_their_path_in_the_asset_not_this_machine():
    folder = runtime_asset_dir(bytecode=True)
    pyc = next(folder.rglob("handler.*.pyc")).read_bytes()
    assert str(folder).encode() not in pyc
    assert b"sendonce_runtime/handler.py" in pyc


def test_bytecode_for_another_python_than_the_runtime_fails_synth_with_the_fix():
    other = lambda_.Runtime.PYTHON_3_10 if sys.version_info[:2] != (3, 10) else lambda_.Runtime.PYTHON_3_12
    here = f"{sys.version_info.major}_{sys.version_info.minor}"
    for props, given in (({"runtime": other}, other.name), ({}, "python3.")):
        stack = cdk.Stack(cdk.App(), "Test")
        with pytest.raises(SendOnceConfigurationError) as raised:
            SendOnceEmailQueue(stack, "Receipts", sender="example.com", precompiled_bytecode=True, **props)
        error = raised.value
        assert error.id == "SendOnce.BytecodeForAnotherPython" and error.path == "Test/Receipts"
        assert f"runtime {given}" in error.message
        assert re.search(rf"while synth runs on Python .*pin runtime=lambda_\.Runtime\.PYTHON_{here}", error.message)
        # Left to the default, the runtime is named as the default, which moves on with aws-cdk-lib: pin it.
        assert ("(the default: the newest runtime aws-cdk-lib knows" in error.message) == (not props)
