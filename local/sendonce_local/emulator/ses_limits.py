"""SES's sending rate, which the emulator lacks: at most R recipients a second ("quotas are based on the number
of recipients"), the rest refused with SES's own throttling error ("TooManyRequestsException: Maximum sending
rate exceeded"), as a real account's SES does.

A token bucket of R tokens (a second's worth) refilled at R a second, in front of the emulator's SendEmail; an
email takes one token per recipient (an email with more recipients than R waits for a full bucket and leaves it
in debt). Off unless a load scenario turns it on; it counts what it accepted and what it throttled.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.core.exceptions import JsonRESTError

from .wrap import wrap_once


class _Throttled(JsonRESTError):
    code = 429

    def __init__(self) -> None:
        super().__init__("TooManyRequestsException", "Maximum sending rate exceeded.")


@dataclass
class SesRateLimit:
    rate: float | None = None  # emails a second; None: unlimited
    accepted: int = 0
    throttled: int = 0
    accepted_at: list[float] = field(default_factory=list)  # monotonic seconds of each accepted send
    recipients: list[int] = field(default_factory=list)  # recipients of each accepted send
    _tokens: float = 0.0
    _updated: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def limit(self, rate: float | None) -> None:
        """Accept at most ``rate`` emails a second from now on (None lifts the limit); counts start afresh."""
        with self._lock:
            self.rate = rate
            self.accepted, self.throttled, self.accepted_at, self.recipients = 0, 0, [], []
            self._tokens, self._updated = (rate or 0.0), time.monotonic()

    def admit(self, recipients: int = 1) -> bool:
        with self._lock:
            now = time.monotonic()
            if self.rate is not None:
                self._tokens = min(self.rate, self._tokens + (now - self._updated) * self.rate)
                self._updated = now
                if self._tokens < min(float(recipients), self.rate) - 1e-9:
                    self.throttled += 1
                    return False
                self._tokens -= recipients
            self.accepted += 1
            self.accepted_at.append(now)
            self.recipients.append(recipients)
            return True


SES_RATE = SesRateLimit()


def _recipients(body: Any) -> int:
    """To + Cc + Bcc of a SESv2 SendEmail request (1 if it cannot be read: a raw message names them inside)."""
    try:
        destination = json.loads(body).get("Destination") or {}
    except (ValueError, AttributeError):
        return 1
    count = sum(len(destination.get(kind) or []) for kind in ("ToAddresses", "CcAddresses", "BccAddresses"))
    return max(1, count)


def limit_ses_sends() -> None:
    """Put :data:`SES_RATE` in front of the emulator's SESv2 SendEmail (idempotent; unlimited until told)."""
    from moto.sesv2.responses import SESV2Response

    def limited(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def send_email(self: Any) -> str:
            if not SES_RATE.admit(_recipients(self.body)):
                raise _Throttled()
            return str(original(self))

        return send_email

    wrap_once(SESV2Response, "send_email", limited, "SES's sending rate")
