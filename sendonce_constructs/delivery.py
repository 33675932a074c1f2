"""What the consumer does when a crash left it unknown whether SES accepted an email."""

from __future__ import annotations

import enum


class DeliveryPolicy(enum.Enum):
    """The policy for the one window no protocol can close: a worker died after the send left it.

    ``AT_MOST_ONCE`` (default) records the key as UNKNOWN and does not send again: an email may be lost, never
    doubled. ``AT_LEAST_ONCE`` takes the claim over and sends again: an email may be doubled, never lost.
    """

    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"
