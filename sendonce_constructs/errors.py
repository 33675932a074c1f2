"""The exception raised at synth time when props break a guarantee, modelled on aws-cdk-lib's ``ValidationError``:
a stable id per rule (to match on, to search for) and the path of the construct it concerns."""

from __future__ import annotations

ID_PREFIX = "SendOnce."


class SendOnceConfigurationError(ValueError):
    """A prop breaks one of the pipeline's guarantees; the message names the prop, the value, the rule and the fix.

    ``id`` is the rule's stable id (``SendOnce.VisibilityTimeoutTooShort``), ``path`` the construct path of the
    pipeline (``MyStack/Receipts``), empty until the pipeline attaches it; ``message`` is the text without them.
    """

    def __init__(self, message: str, id: str = f"{ID_PREFIX}InvalidProp", path: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.id = id
        self.path = path

    def __str__(self) -> str:
        where = f" at {self.path}" if self.path else ""
        return f"{self.id}{where}: {self.message}"

    def at(self, path: str) -> SendOnceConfigurationError:
        """The same error, attached to the construct at ``path``."""
        return SendOnceConfigurationError(self.message, self.id, path)
