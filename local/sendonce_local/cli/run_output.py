"""What `sendonce-local run` prints of its functions' output: each record handled as one readable line (or the
function's own JSON line with ``--json``), and the summary counted from those lines when the run ends."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

from sendonce_contract.schema import Ledger
from sendonce_runtime.outcome import DEAD_LETTER_REASONS, Outcome, Tally

# The consumer's outcomes (as its log lines name them) that put the job in the DLQ, with the reason code it carries.
DEAD_LETTERED = {outcome.value: code.value for outcome, code in DEAD_LETTER_REASONS.items()}
# What the summary counts each outcome as (the outcome table says); a line it does not know is handed back.
TALLIES = {outcome.value: outcome.meaning.summary for outcome in Outcome}


@dataclass
class Summary:
    """What the functions said they did, counted from their log lines."""

    outcomes: Counter[str] = field(default_factory=Counter)
    dead_lettered: Counter[str] = field(default_factory=Counter)
    evidence: Counter[str] = field(default_factory=Counter)
    relayed: int = 0

    def add(self, line: dict[str, Any]) -> None:
        outcome = str(line.get("outcome", ""))
        if line.get("logger") == "sendonce.evidence":
            if outcome in ("recorded", "double_send"):
                self.evidence[str(line.get("eventType"))] += 1
            return
        if line.get("logger") == "sendonce":
            self.outcomes[outcome] += 1
            if outcome in DEAD_LETTERED:
                self.dead_lettered[DEAD_LETTERED[outcome]] += 1

    def text(self, elapsed_s: float) -> str:
        tallies: Counter[str] = Counter()
        for name, n in self.outcomes.items():
            tallies[TALLIES.get(name, Tally.HANDED_BACK)] += n
        tallies[Tally.DEAD_LETTERED] = sum(self.dead_lettered.values())  # every outcome with a reason code
        dead = ", ".join(f"{code} {n}" for code, n in sorted(self.dead_lettered.items()))
        by_code = {Tally.DEAD_LETTERED: f" ({dead})"} if dead else {}
        counts = ", ".join(f"{tally} {tallies[tally]}{by_code.get(tally, '')}" for tally in Tally.ORDER)
        events = ", ".join(f"{kind} {n}" for kind, n in sorted(self.evidence.items()))
        return (f"summary after {elapsed_s:.0f} s: {counts}; SES events recorded "
                f"{sum(self.evidence.values())}{f' ({events})' if events else ''}")


def _worth_a_line(line: dict[str, Any]) -> bool:
    """Not the EMF and info lines a person does not need, nor an outcome publisher's batch that had no transition."""
    if "outcome" not in line:
        return False
    return line.get("logger") != "sendonce.outcomes" or bool(line.get("published") or line.get("failed"))


def readable(line: dict[str, Any]) -> str:
    """One record's outcome for a person: when, what, which key, and the detail that matters."""
    when = time.strftime("%H:%M:%S")
    if line.get("logger") == "sendonce.evidence":
        what = f"SES {line.get('eventType', 'event')} {line.get('outcome')}"
    elif line.get("logger") == "sendonce.outcomes":  # the outcome publisher: a batch of transitions, no one key
        what = f"outcome events {line.get('outcome')}"
        return "  ".join([when, f"{what:<22}", f"{line.get('published', 0)} published, {line.get('failed', 0)} "
                          f"failed: {', '.join(map(str, line.get('transitions', []))) or 'none'}"])
    else:
        what = str(line.get("outcome", "?"))
    parts = [when, f"{what:<22}", str(line.get(Ledger.KEY) or line.get("messageId") or "-")]
    if line.get(Ledger.SES_MESSAGE_ID):
        parts.append(f"ses {line[Ledger.SES_MESSAGE_ID]}")
    if line.get("outcome") in DEAD_LETTERED:
        parts.append(f"-> DLQ ({DEAD_LETTERED[str(line['outcome'])]})")
    if line.get("reason"):
        parts.append(f"({' '.join(str(line['reason']).split())[:120]})")
    return "  ".join(parts)


class FunctionOutput:
    """A pipe the functions write their lines into; a thread prints each (readable, or as is with ``as_json``)
    and counts it for the summary. Lines that are not JSON (a traceback) pass through."""

    def __init__(self, out: IO[str], as_json: bool) -> None:
        self.summary = Summary()
        self._out, self._json = out, as_json
        read_fd, write_fd = os.pipe()
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8", errors="replace")
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8")
        self._thread = threading.Thread(target=self._pump, name="function-output", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        for raw in self._reader:
            text = raw.rstrip("\n")
            try:
                line = json.loads(text)
            except ValueError:
                line = None
            if isinstance(line, dict):
                self.summary.add(line)
                if not self._json and not _worth_a_line(line):
                    continue
                text = text if self._json else readable(line)
            say_to(self._out, text)

    def close(self) -> None:
        self.writer.close()
        self._thread.join(timeout=5)
        self._reader.close()


def say_to(out: IO[str], text: str) -> None:
    with contextlib.suppress(BrokenPipeError):  # the reader went away (`| head`): keep running quietly
        print(text, file=out, flush=True)

