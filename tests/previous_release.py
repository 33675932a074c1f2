"""The previous release's consumer, taken from the git history and run in its own process against the emulator.

The previous release is a commit of this repository's history; its contract and runtime are unpacked with
``git archive`` and put first on the child process's ``sys.path``, so the child runs that release's code, not this
checkout's. A clone without that commit (a shallow one) fails here, saying so.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

PREVIOUS_RELEASE = "ade73827fdecdaa2b05504d6b2a9012c2e7df0b7"  # 0.1.0
REPOSITORY = Path(__file__).resolve().parents[1]

# Run in the child: the previous release's handler on one SQS event, with settings given as JSON on stdin.
_RUN = """
import json, sys
from pathlib import Path
request = json.load(sys.stdin)
import sendonce_runtime, sendonce_contract
for module in (sendonce_runtime, sendonce_contract):
    if not Path(module.__file__).resolve().is_relative_to(Path(request["root"]).resolve()):
        sys.exit(f"{module.__name__} was imported from {module.__file__}, not from the previous release")
from sendonce_runtime.handler import Consumer
from sendonce_runtime.settings import Settings

class Context:
    def get_remaining_time_in_millis(self):
        return 30_000

consumer = Consumer.from_settings(Settings(**request["settings"]))
print(json.dumps({"response": consumer.handle(request["event"], Context())}))
"""


def unpack_previous_release(target: Path) -> Path:
    """The previous release's ``contract`` and ``runtime`` folders under ``target``; fails if the history lacks it."""
    found = subprocess.run(["git", "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"], cwd=REPOSITORY,
                           capture_output=True, check=False)
    if found.returncode != 0:
        raise RuntimeError(f"the previous release (commit {PREVIOUS_RELEASE[:7]}) is not in this clone's history: "
                           "the upgrade tests need a full clone (git fetch --unshallow)")
    archive = subprocess.run(["git", "archive", "--format=tar", PREVIOUS_RELEASE, "contract", "runtime"],
                             cwd=REPOSITORY, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(target, filter="data")
        else:  # Python 3.11 before 3.11.4 has no extraction filters; the archive is this repository's own history
            tar.extractall(target)
    return target


def run_previous_consumer(root: Path, settings: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """The previous release's consumer handles ``event``; returns its batch response and its outcome lines."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "contract"), str(root / "runtime")])
    request = {"root": str(root), "settings": settings, "event": event}
    done = subprocess.run([sys.executable, "-c", _RUN], input=json.dumps(request), capture_output=True, text=True,
                          env=env, cwd=root, timeout=120, check=False)
    if done.returncode != 0:
        raise AssertionError(f"the previous release's consumer failed: {done.stderr[-2000:]}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    *outcomes, last = lines
    return {"response": last["response"], "outcomes": outcomes}
