"""What the consumer does with a send whose fate a crash left unknown (its worker died after it may have left)."""

from __future__ import annotations

import enum


class DeliveryPolicy(enum.Enum):
    """Both ask SES first: a key with an SES event for its email is SENT and never sent again.

    ``RESEND_WITHOUT_EVIDENCE`` (default): with no SES event for it by the end of the grace period, send it again;
    never lost, doubled only when SES's events for the first email are lost (each double found is counted).
    ``NEVER_RESEND``: never send it again; with no SES event it stays UNKNOWN for a person: never doubled, may be
    lost. With SES events off there is no evidence, and the two are the old at-least-once and at-most-once.
    """

    RESEND_WITHOUT_EVIDENCE = "resend-without-evidence"
    NEVER_RESEND = "never-resend"
    # The names before SES's events were the evidence; the same behaviour when events are off.
    AT_LEAST_ONCE = "resend-without-evidence"
    AT_MOST_ONCE = "never-resend"

    @classmethod
    def _missing_(cls, value: object) -> DeliveryPolicy | None:
        return FORMER_VALUES.get(str(value))


# The values before SES's events were the evidence, still accepted from a job's "delivery" field.
FORMER_VALUES = {"at-least-once": DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, "at-most-once": DeliveryPolicy.NEVER_RESEND}
