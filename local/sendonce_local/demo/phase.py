"""What a demo phase is: a module of ``demo.phases`` with one entry in ``PHASES``, run in order once the exactly-once
traffic, the residual and the bursts are done. Its entry names the phase (its key in the report and report.json),
the function that runs it and the emails it counts itself; its report says whether it held, its lines, what the
verdict says of it either way, and any aim it missed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import IO, Any

from ..emulator.server import LocalAws
from ..lambda_service.stack_runners import StackRunners
from .example_app import Deployed
from .options import DemoOptions


class PhaseReport:
    """A phase's report (a dataclass of its counts). ``ok`` weighs in the verdict; ``failure`` is what the verdict
    says when it fails, ``summary`` what it adds when it passes (nothing unless given)."""

    @property
    def ok(self) -> bool:
        raise NotImplementedError

    def lines(self) -> list[str]:
        raise NotImplementedError

    def failure(self) -> str:
        raise NotImplementedError

    def summary(self) -> str:
        return ""

    def missed_aims(self) -> list[str]:
        """Goals that are not guarantees, missed: said beside the verdict, never part of it."""
        return []

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}  # type: ignore[call-overload]


@dataclass(frozen=True)
class PhaseContext:
    """What every phase is given: the options, the emulator, the deployed app, the consumer log, ``say``, and the
    runners that stand through the whole demo (the recorder's and the outcome publishers')."""

    options: DemoOptions
    aws: LocalAws
    deployed: Deployed
    log: IO[str]
    say: Callable[[str], None]
    standing: StackRunners


def owns_nothing(sent: Any) -> bool:
    return False


@dataclass(frozen=True)
class Phase:
    """One entry of ``demo.phases.PHASES``: the phase's name, how it runs (None: not in this run) and which of the
    emulator's sent emails it counts itself, so the exactly-once count of the traffic leaves them out."""

    name: str
    run: Callable[[PhaseContext], PhaseReport | None]
    owns: Callable[[Any], bool] = owns_nothing
