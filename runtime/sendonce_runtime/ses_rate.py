"""SES's own sending rate, the ceiling a paced pipeline plans under: ``GetAccount``'s ``SendQuota.MaxSendRate``,
read at most once a minute by an instance (docs: sending rate).

``send_rate`` is the pipeline's share of the account's rate. When SES allows less than the pipeline plans (a new
account, a lowered quota, another pipeline's share forgotten), every bucket of every lane scales down by the same
factor, so the lanes keep their proportions and SES is never asked faster than it sends: a burst then drains at
SES's rate instead of at the rate its throttling lets through.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

READ_EVERY_S = 60.0


class SesRateCeiling:
    """The factor (at most 1) by which the pipeline's planned rate must shrink to fit SES's ``MaxSendRate``. An
    answer SES does not give keeps the last factor (1 until SES first answers): pacing never stops for it."""

    def __init__(self, ses: Any, planned_rate: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._ses = ses
        self._planned_rate = planned_rate
        self._monotonic = monotonic
        self._factor = 1.0
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def factor(self) -> float:
        now = self._monotonic()
        with self._lock:
            if self._read_at is not None and now < self._read_at + READ_EVERY_S:
                return self._factor
            self._read_at = now  # one read a minute by this instance, whichever thread asks
        try:
            rate = float(self._ses.get_account()["SendQuota"]["MaxSendRate"])
        except (ClientError, BotoCoreError, KeyError, TypeError, ValueError):
            return self._factor
        factor = min(1.0, rate / self._planned_rate) if rate > 0 else 1.0
        with self._lock:
            self._factor = factor
        return factor
