"""SQS's delays, played shorter when a run asks: a message sent with a longer ``DelaySeconds`` than the run's
longest becomes visible after that longest instead.

Why: while SES stops sending, the consumer parks each job for SQS's longest delay, 15 minutes a copy, which a
demo cannot wait out. The demo's SES-stops phase sets a longest delay of 20 s for its run and unsets it
after, and says so in its output: the jobs then come back as they would, only sooner. Everything else of SQS is
as before, and the consumer asks for the delays it always does (the request counts show the calls unchanged).

Off until set: ``POST /moto-api/sendonce/sqs-delays`` ``{"longestDelayS": N}`` (``null`` to turn it off), per
account and region as moto's SQS is. The setting is a moto backend's, so moto's reset (``POST /moto-api/reset``)
turns it off, also when the emulator runs as its own process (``sendonce-local serve``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend

from sendonce_contract.sqs_limits import SQS_MAX_DELAY_S

from .ses_api import ControlRefused, control, serve_control
from .wrap import wrap_once

DELAYS_CONTROL_PATH = "/moto-api/sendonce/sqs-delays"


class SqsDelaysBackend(BaseBackend):
    """One account and region's longest delay (None: SQS's own). A moto backend, so moto's reset forgets it."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.longest_delay_s: int | None = None


sqs_delays_backends = BackendDict(SqsDelaysBackend, "sqs")


def _shortened(send_message: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send_message)
    def send(self: Any, queue_name: str, message_body: str, message_attributes: Any = None,
             delay_seconds: int | None = None, *args: Any, **kwargs: Any) -> Any:
        longest = sqs_delays_backends[self.account_id][self.region_name].longest_delay_s
        # A delay SQS refuses (over 15 minutes) is left for moto to refuse.
        if longest is not None and delay_seconds is not None and longest < int(delay_seconds) <= SQS_MAX_DELAY_S:
            delay_seconds = longest
        return send_message(self, queue_name, message_body, message_attributes, delay_seconds, *args, **kwargs)

    return send


def play_shorter_sqs_delays() -> None:
    """Wrap moto's SQS send (a batch's entries go through it too) with the longest delay (idempotent)."""
    from moto.sqs.models import SQSBackend

    wrap_once(SQSBackend, "send_message", _shortened, "shorter SQS delays")


@control(sqs_delays_backends)
def set_longest_delay(body: dict[str, Any], backend: SqsDelaysBackend) -> dict[str, Any]:
    longest = body.get("longestDelayS")
    if longest is not None and (isinstance(longest, bool) or not isinstance(longest, int) or longest < 0):
        raise ControlRefused(400, "longestDelayS must be a whole number of seconds, 0 or more, or null")
    backend.longest_delay_s = longest
    return {"longestDelayS": longest}


def serve_sqs_delays_control() -> None:
    """Add ``POST /moto-api/sendonce/sqs-delays`` to moto's API application (idempotent; before the server answers
    its first /moto-api)."""
    serve_control(DELAYS_CONTROL_PATH, set_longest_delay)
