"""The rule of a FIFO queue's consumer: only FIFO deployments import it."""

from __future__ import annotations

from sendonce_contract.fifo import SEND_AT_ON_FIFO
from sendonce_contract.message import ParsedJob

from .checks import JobRefusal
from .outcome import Outcome


class NoSendAtOnFifo:
    """A FIFO queue cannot hold a job back without blocking its group: a sendAt there breaks the contract."""

    def __call__(self, job: ParsedJob) -> JobRefusal | None:
        return None if job.send_at_ms is None else (Outcome.INVALID_MESSAGE, SEND_AT_ON_FIFO)
