"""3. Cold start (import time in a fresh interpreter), 4. the Lambda asset's size, 5. synth time."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from plan import ROOT, Spread

# (what is already imported, what is measured, which asset): boto3's own import, then each consumer's imports on
# top of it in the same interpreter, as at a Lambda cold start (the runtime has boto3; the handler adds the rest).
POWERTOOLS = ("from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig, "
              "idempotent_function; from aws_lambda_powertools.utilities.batch import BatchProcessor")
IMPORTS = {
    "import boto3": ("", "import boto3", None),
    "sendonce handler, compiled from source (the default asset: no .pyc)": (
        "import boto3", "import sendonce_runtime.handler", "source"),
    "sendonce handler, precompiled_bytecode=True (the asset's own bytecode)": (
        "import boto3", "import sendonce_runtime.handler", "precompiled"),
    "Powertools idempotency + batch": ("import boto3", POWERTOOLS, None),
}


def runtime_copy(kind: str) -> Path:
    """A private copy of the consumer's asset, as synth makes it: ``source`` (the default) or ``precompiled``."""
    import shutil
    import tempfile

    from sendonce_constructs.runtime_asset import runtime_asset_dir

    folder = Path(tempfile.mkdtemp(prefix=f"sendonce-{kind}-"))
    shutil.copytree(runtime_asset_dir(bytecode=kind == "precompiled"), folder, dirs_exist_ok=True)
    return folder


def cold_starts(runs: int) -> dict[str, Spread]:
    """CPU milliseconds of each import of ``IMPORTS``, ``runs`` times interleaved, each in a fresh interpreter.

    CPU time of the import alone, not the wall clock of the whole interpreter: on a shared machine the wall clock
    of a 200 ms start-up spreads by more than the consumer's whole import, while its CPU time does not."""
    copies = {kind: runtime_copy(kind) for kind in ("source", "precompiled")}
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(runs):
        for name, (before, statement, kind) in IMPORTS.items():
            samples[name].append(import_ms(before, statement, copies[kind] if kind else None))
    return {name: Spread(values) for name, values in samples.items()}


def import_ms(before: str, statement: str, code_dir: Path | None) -> float:
    """CPU milliseconds ``statement`` takes in a fresh interpreter once ``before`` ran; the handler from
    ``code_dir``, compiled as found there (no bytecode is written)."""
    code = (f"import time\n{before}\nt = time.process_time()\n{statement}\n"
            "print((time.process_time() - t) * 1000)")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if code_dir is not None:
        env["PYTHONPATH"] = str(code_dir)
    return float(subprocess.check_output([sys.executable, "-c", code], env=env, text=True, cwd="/"))


def asset_sizes() -> dict[str, tuple[int, int]]:
    """(files, bytes zipped) of the consumer's asset, as synth makes it by default and with precompiled_bytecode."""
    from sendonce_constructs.runtime_asset import runtime_asset_dir

    sizes = {}
    for kind in ("source", "precompiled"):
        buffer = io.BytesIO()
        folder = runtime_asset_dir(bytecode=kind == "precompiled")
        files = sorted(path for path in folder.rglob("*") if path.is_file())
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, path.relative_to(folder).as_posix())
        label = "default (source)" if kind == "source" else "precompiled_bytecode=True"
        sizes[label] = (len(files), len(buffer.getvalue()))
    return sizes


def synth_seconds(flavour: str) -> float:
    output = subprocess.check_output([sys.executable, str(ROOT / "bench" / "synth_probe.py"), flavour],
                                     text=True, stderr=subprocess.DEVNULL)
    return float(output.strip().splitlines()[-1])
