"""An email job, validated against the consumer's own message contract before it is sent anywhere."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sendonce_contract.message import TRACKING_SETTINGS, VERSION_FIELD, InvalidMessage, lowest_version, parse_job
from sendonce_contract.priority import DEFAULT_PRIORITY, PRIORITY_FIELD, Priority
from sendonce_contract.schema import DEDUPE_KEY, EXPIRES_AT_FIELD, TRACKING_FIELD
from sendonce_contract.tenant import TENANT_FIELD

from .attachments import Attachment


class InvalidJob(ValueError):
    """The job breaks the message contract; raised in the producer, instead of a DLQ entry later."""


@dataclass(frozen=True)
class EmailJob:
    """One email. Exactly one of simple content (``subject`` with ``html`` and/or ``text``), ``template`` or
    ``raw`` (base64 MIME); simple and template content may carry ``attachments`` and ``headers``. Validated on
    construction by the consumer's own parser."""

    dedupe_key: str
    sender: str
    to: Sequence[str]
    subject: str | None = None
    html: str | None = None
    text: str | None = None
    template: str | None = None
    template_data: Mapping[str, Any] | None = None
    raw: str | None = None
    cc: Sequence[str] = ()
    bcc: Sequence[str] = ()
    reply_to: Sequence[str] = ()
    configuration_set: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    delivery: str | None = None
    send_at: datetime | None = None  # not sent before this time (timezone-aware), at most dedupe_ttl ahead
    # Not sent after this time (timezone-aware): a one-time code or a reset link met later is acknowledged unsent,
    # its key recorded EXPIRED, instead of reaching its reader stale.
    expires_at: datetime | None = None
    # "urgent" goes to the pipeline's urgent lane (urgent_lane); routing, not content: the key is sent once either way
    priority: Priority | str = DEFAULT_PRIORITY
    tenant: str | None = None  # the customer it is sent for: the queue's MessageGroupId, SES's TenantName
    attachments: Sequence[Attachment] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    # This message's own tracking, over its configuration set's: False turns SES's open tracking, or its click
    # tracking (the redirect it puts in each link), off for it; True on; None leaves the set's.
    open_tracking: bool | None = None
    click_tracking: bool | None = None

    def __post_init__(self) -> None:
        for name in ("to", "cc", "bcc", "reply_to"):
            value = getattr(self, name)
            object.__setattr__(self, name, (value,) if isinstance(value, str) else tuple(value))
        object.__setattr__(self, "attachments", tuple(self.attachments))
        try:
            parse_job(self.to_message(), sqs_message_id="")
        except InvalidMessage as error:
            raise InvalidJob(f"{self.dedupe_key!r}: {error.reason}") from None

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {DEDUPE_KEY: self.dedupe_key, "from": self.sender, "to": list(self.to)}
        optional = {
            "cc": list(self.cc), "bcc": list(self.bcc), "replyTo": list(self.reply_to), "subject": self.subject,
            "html": self.html, "text": self.text, "raw": self.raw, "configurationSet": self.configuration_set,
            "tags": dict(self.tags), "delivery": self.delivery,
            "sendAt": None if self.send_at is None else self.send_at.isoformat(), TENANT_FIELD: self.tenant,
            EXPIRES_AT_FIELD: None if self.expires_at is None else self.expires_at.isoformat(),
            "attachments": [a.to_document() for a in self.attachments], "headers": dict(self.headers),
            # bulk is the default: left out, so a bulk job needs no newer contract version
            PRIORITY_FIELD: None if self.priority == DEFAULT_PRIORITY else _text(self.priority),
            TRACKING_FIELD: {setting: value for setting, value in zip(
                TRACKING_SETTINGS, (self.open_tracking, self.click_tracking), strict=True) if value is not None},
        }
        document.update({k: v for k, v in optional.items() if v not in (None, [], {})})
        if self.template is not None:
            document["template"] = {"name": self.template, "data": dict(self.template_data or {})}
        version = lowest_version(document)
        if version > 1:  # a consumer too old for a field puts the job back instead of dead-lettering it
            document[VERSION_FIELD] = version
        return document

    @property
    def lane(self) -> Priority:
        """The lane this job goes to (its ``priority``, validated on construction)."""
        return Priority(self.priority)

    def to_message(self) -> str:
        """The SQS body the consumer expects."""
        return json.dumps(self.to_document(), separators=(",", ":"), ensure_ascii=False)



def _text(priority: Priority | str) -> str:
    # As given, so that a value outside the contract fails its parsing with the contract's own reason.
    return priority.value if isinstance(priority, Priority) else priority
