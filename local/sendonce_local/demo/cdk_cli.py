"""The real CDK CLI, pointed at the emulator: `cdk bootstrap` and `cdk deploy`, nothing rewritten."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path


class CdkCliError(RuntimeError):
    pass


def cdk_executable() -> str:
    found = shutil.which("cdk")
    if found is None:
        raise CdkCliError(
            "the CDK CLI is not on PATH: run `make demo` from the repository (it installs it), "
            "or `npm install aws-cdk` and put node_modules/.bin on PATH"
        )
    return found


def run_cdk(args: list[str], project_dir: Path, environment: Mapping[str, str], log_path: Path) -> None:
    command = [cdk_executable(), *args]
    with log_path.open("a", encoding="utf-8") as log:
        log.write(f"$ cdk {' '.join(args)}\n")
        log.flush()
        result = subprocess.run(command, cwd=project_dir, env=dict(environment), stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        raise CdkCliError(f"`cdk {args[0]}` failed (exit {result.returncode}); its output is in {log_path}")


def bootstrap_and_deploy(
    stack: str,
    project_dir: Path,
    cdk_out: Path,
    environment: Mapping[str, str],
    account: str,
    region: str,
    context: Mapping[str, str],
    log_path: Path,
) -> None:
    context_args = [arg for key, value in context.items() for arg in ("--context", f"{key}={value}")]
    common = ["--output", str(cdk_out), "--no-notices", "--no-version-reporting", *context_args]
    run_cdk(["bootstrap", f"aws://{account}/{region}", *common], project_dir, environment, log_path)
    run_cdk(["deploy", stack, "--require-approval", "never", "--progress", "events", *common],
            project_dir, environment, log_path)
