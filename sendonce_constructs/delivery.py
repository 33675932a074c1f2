"""What the consumer does with a send a crash left undecided (the construct's side of the runtime's policy)."""

from __future__ import annotations

import enum


class DeliveryPolicy(enum.Enum):
    """Both ask SES first: a key with an SES event for its email is SENT and is never sent again.

    ``RESEND_WITHOUT_EVIDENCE`` (default): no SES event for it by the end of ``evidence_grace_period``, send it
    again: never lost, doubled only when SES's events for the first email are lost (each double found is counted).
    ``NEVER_RESEND``: never send it again: with no SES event it stays UNKNOWN for a person: never doubled, may be
    lost. With ``ses_events=False`` there is no evidence, and they are the former at-least-once and at-most-once.
    """

    RESEND_WITHOUT_EVIDENCE = "resend-without-evidence"
    NEVER_RESEND = "never-resend"
    AT_LEAST_ONCE = "resend-without-evidence"  # the name before SES's events were the evidence
    AT_MOST_ONCE = "never-resend"  # the name before SES's events were the evidence
