"""`sendonce-local serve` in its own process, as a user starts it: the exports it prints, read until it says it
runs, then stopped with SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SENDONCE_LOCAL = Path(sys.executable).parent / "sendonce-local"


@contextmanager
def served(stderr: Path, exports: dict[str, str] | None = None
           ) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    """The process and what it exported (added to ``exports``), its stderr in ``stderr``."""
    with stderr.open("w") as err:
        process = subprocess.Popen([str(SENDONCE_LOCAL), "serve"], stdout=subprocess.PIPE, stderr=err, text=True)
    found = exports if exports is not None else {}
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("export "):
            name, _, value = line[len("export "):].strip().partition("=")
            found[name] = value
        if "runs until" in line:
            break
    try:
        yield process, found
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
