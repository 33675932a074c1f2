"""The mis-keyed-producer guard, opt-in per pipeline: what it watches, its modes and its limits (docs: choosing a
key). The construct's props, its synth rules and the consumer's check all read them from here.

A key made from something that changes between attempts (an SQS message id, a timestamp, an attempt counter)
turns every retry into a new email. The guard sees the symptom from the consumer: the same recipients getting the
same content under a different key within a window (a *suspected double*), and one recipient getting more emails
in a window than a cap allows (a runaway loop). It never sees a copy whose content differs (a body that prints the
time it was rendered): those are different emails to it.
"""

from __future__ import annotations

import enum
from typing import Final


class OnSuspectedDouble(enum.Enum):
    """What the consumer does with a job whose recipients got the same content under another key in the window."""

    FLAG = "flag"  # sent, and counted (SuspectedDoubles) and published (Email Suspected Double)
    HOLD = "hold"  # counted and published, and moved to the DLQ (suspected-double) unsent: a redrive sends it


DEFAULT_GUARD_WINDOW_S: Final = 3_600
MIN_GUARD_WINDOW_S: Final = 60
MAX_GUARD_WINDOW_S: Final = 86_400
MIN_RECIPIENT_CAP: Final = 1
# A recipient's window keeps the 16-character digest of each key it counted in one item (DynamoDB's 400 KB):
# a thousand is 16 KB, and far above what a person should get from one pipeline in a day.
MAX_RECIPIENT_CAP: Final = 1_000
COUNTED_KEY_CHARS: Final = 16
# A guard item outlives its window by this much, then DynamoDB's TTL removes it (TTL deletes within days, so the
# guard compares the window's end itself and never trusts an item to be gone).
GUARD_ITEM_MARGIN_S: Final = 3_600
