"""How many plans the property tests that play against the emulator draw.

Each plan costs real calls to the emulator, so `make test` draws a number that keeps pytest under five minutes on
two cores, and `make test-soak` draws ``SENDONCE_EXAMPLES`` times as many (eight).
"""

from __future__ import annotations

import os

SCALE = float(os.environ.get("SENDONCE_EXAMPLES", "1"))


def examples(base: int) -> int:
    """``base`` plans in `make test`, scaled for a soak run."""
    return max(1, round(base * SCALE))
