"""The check of a FIFO queue's consumer: only FIFO deployments import it."""

from __future__ import annotations

from sendonce_contract.fifo import SEND_AT_ON_FIFO

from .checks import Delivery, Rest
from .outcome import Outcome, Verdict


class NoSendAtOnFifo:
    """A FIFO queue cannot hold a job back without blocking its group: a sendAt there breaks the contract."""

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        if delivery.job.send_at_ms is not None:
            return delivery.refuse(Outcome.INVALID_MESSAGE, SEND_AT_ON_FIFO)
        return rest(delivery)
