"""What a SESv2 SendEmail carried besides its addresses and text: its attachments and header fields, which moto's
SESv2 accepts and drops. Read from the request as SES would take it, kept as the emulator's log of sends keeps it:
each attachment's name, type, disposition, content id, size and SHA-256 (never its content), and each header."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SentAttachment:
    file_name: str
    content_type: str | None
    disposition: str | None  # SES's ATTACHMENT or INLINE, as sent (None: SES's default, ATTACHMENT)
    content_id: str | None
    size: int  # decoded bytes
    sha256: str  # of the decoded content

    def as_json(self) -> dict[str, Any]:
        return {"fileName": self.file_name, "contentType": self.content_type, "disposition": self.disposition,
                "contentId": self.content_id, "size": self.size, "sha256": self.sha256}


def sent_parts(params: dict[str, Any]) -> tuple[tuple[SentAttachment, ...], tuple[tuple[str, str], ...]]:
    """The attachments and headers of a SendEmail request's simple or template content (raw has neither)."""
    content = params.get("Content", {})
    carrier = content.get("Simple") or content.get("Template") or {}
    attachments = tuple(_attachment(a) for a in carrier.get("Attachments", []))
    headers = tuple((str(h["Name"]), str(h["Value"])) for h in carrier.get("Headers", []))
    return attachments, headers


def _attachment(entry: dict[str, Any]) -> SentAttachment:
    # The JSON protocol carries a blob as base64; a request that is not is recorded as it came.
    raw = entry.get("RawContent", "")
    try:
        content = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError, TypeError):
        content = str(raw).encode("utf-8")
    return SentAttachment(str(entry.get("FileName", "")), entry.get("ContentType"), entry.get("ContentDisposition"),
                          entry.get("ContentId"), len(content), hashlib.sha256(content).hexdigest())


def send_as_json(send: Any) -> dict[str, Any]:
    """One logged send as the emulator's HTTP endpoint answers it."""
    fields = asdict(send)
    return {
        "messageId": fields["ses_message_id"], "acceptedAt": fields["accepted_at"], "from": fields["source"],
        "destinations": list(fields["destinations"]), "subject": fields["subject"],
        "configurationSet": fields["configuration_set"], "tags": dict(fields["tags"]), "tenantName": send.tenant_name,
        "headers": [list(pair) for pair in send.headers],
        "attachments": [attachment.as_json() for attachment in send.attachments],
        "tracking": dict(send.tracking),
    }
