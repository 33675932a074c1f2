"""The rule of a stage deployed with ``allowed_recipients``: only those deployments import it (and the allow
list's parser), so every other cold start compiles neither."""

from __future__ import annotations

from sendonce_contract.allowed_recipients import AllowedRecipients
from sendonce_contract.message import ParsedJob

from .checks import JobRefusal
from .outcome import Outcome


class RecipientsAllowed:
    """A stage that sends only to allowed_recipients dead-letters a job naming anyone else; nothing is sent."""

    def __init__(self, allowed: AllowedRecipients) -> None:
        self._allowed = allowed

    def __call__(self, job: ParsedJob) -> JobRefusal | None:
        refused = self._allowed.refused((("to", job.to), ("cc", job.cc), ("bcc", job.bcc)))
        if not refused:
            return None
        return (Outcome.RECIPIENT_NOT_ALLOWED,
                f"{', '.join(refused)} not in the pipeline's allowed_recipients: this stage sends to those only; "
                "nothing was sent")
