"""The policy for the one window no protocol closes: a worker died after its send left it."""

from __future__ import annotations

import enum


class DeliveryPolicy(enum.Enum):
    AT_MOST_ONCE = "at-most-once"  # an expired in-flight record becomes UNKNOWN: may lose, never doubles
    AT_LEAST_ONCE = "at-least-once"  # an expired in-flight record is taken over and sent: may double, never loses
