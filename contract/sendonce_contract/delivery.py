"""What the consumer does with a send whose fate a crash left unknown (its worker died after it may have left)."""

from __future__ import annotations

import enum


class DeliveryPolicy(enum.Enum):
    """Both ask SES first: a key with an SES event for its email is SENT and never sent again.

    ``RESEND_WITHOUT_EVIDENCE`` (default): with no SES event for it by the end of the grace period, send it again;
    never lost, doubled only when SES's events for the first email are lost (each double found is counted).
    ``NEVER_RESEND``: never send it again; with no SES event it stays UNKNOWN for a person: never doubled, may be
    lost. With SES events off there is no evidence: the first resends as soon as the dead worker's lease expires,
    the second records UNKNOWN.
    """

    RESEND_WITHOUT_EVIDENCE = "resend-without-evidence"
    NEVER_RESEND = "never-resend"
