"""Where `sendonce-local run` keeps its DynamoDB stream positions between runs, as an event source mapping does.

On AWS a mapping keeps its position across anything: a second run must continue after the records the first one
handled, not publish them again from the stream's start. One small JSON file holds, per emulator endpoint, stream
ARN and shard, the sequence number of the last record handled. A new emulator has new stream ARNs (their label is
the stream's creation time), so it starts fresh on its own; the file never needs cleaning by hand.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

FILE_NAME = "stream-checkpoints.json"


def default_path() -> Path:
    """``$XDG_STATE_HOME/sendonce/stream-checkpoints.json`` (``~/.local/state`` when unset), as the XDG base
    directory spec places state that outlives a process but is no user data."""
    state_home = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state_home) / "sendonce" / FILE_NAME


class StreamCheckpoints:
    """The last sequence number handled per (endpoint, stream ARN, shard), read and written under a file lock so
    that runs against other emulators (or at the same time) never lose each other's entries."""

    def __init__(self, endpoint: str, path: Path | None = None) -> None:
        self.path = path or default_path()
        self._endpoint = endpoint
        self._lock = threading.Lock()  # the stream runners of one run write from their own threads

    def get(self, stream_arn: str, shard_id: str) -> str | None:
        with self._locked(exclusive=False):
            position = self._load().get(self._endpoint, {}).get(stream_arn, {}).get(shard_id)
        return str(position) if position else None

    def put(self, stream_arn: str, shard_id: str, sequence_number: str) -> None:
        with self._locked(exclusive=True):
            state = self._load()
            state.setdefault(self._endpoint, {}).setdefault(stream_arn, {})[shard_id] = sequence_number
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Written whole and renamed: a run killed mid-write leaves the previous file, never half of one.
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".checkpoints-")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(state, out, indent=1, sort_keys=True)
            os.replace(temporary, self.path)

    def _load(self) -> dict[str, Any]:
        try:
            state = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}  # no run yet, or a file that is not ours: start fresh, as a new mapping does
        return state if isinstance(state, dict) else {}

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.path.with_name(self.path.name + ".lock"), "a", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
