"""Attachments for an :class:`~sendonce_producer.EmailJob`: a file carried in the job (``content``) or a claim
check naming an object in the pipeline's attachments bucket (``s3``), checked by the contract's own rules."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sendonce_contract.attachments import ATTACHMENT, INLINE, S3Location


@dataclass(frozen=True)
class Attachment:
    """One file. Build it with :meth:`from_bytes`, :meth:`from_path` or :meth:`from_s3`; a ``content_id`` makes
    it inline (the html refers to it as ``cid:<content_id>``). The type is guessed from the file name when not
    given."""

    file_name: str
    content_type: str
    content: bytes | None = None
    s3: S3Location | None = None
    content_id: str | None = None

    @property
    def disposition(self) -> str:
        return INLINE if self.content_id is not None else ATTACHMENT

    @classmethod
    def from_bytes(cls, content: bytes, file_name: str, content_type: str | None = None, *,
                   content_id: str | None = None) -> Attachment:
        return cls(file_name, content_type or guess_type(file_name), content=bytes(content), content_id=content_id)

    @classmethod
    def from_path(cls, path: str | Path, file_name: str | None = None, content_type: str | None = None, *,
                  content_id: str | None = None) -> Attachment:
        path = Path(path)
        return cls.from_bytes(path.read_bytes(), file_name or path.name, content_type, content_id=content_id)

    @classmethod
    def from_s3(cls, bucket: str, key: str, file_name: str, content_type: str | None = None, *,
                content_id: str | None = None) -> Attachment:
        """An object already in the pipeline's attachments bucket (the consumer reads that bucket only)."""
        return cls(file_name, content_type or guess_type(file_name), s3=S3Location(bucket, key),
                   content_id=content_id)

    def __repr__(self) -> str:  # never the content
        where = f"s3://{self.s3.bucket}/{self.s3.key}" if self.s3 else f"{len(self.content or b'')} bytes"
        return f"Attachment({self.file_name!r}, {self.content_type!r}, {self.disposition}, {where})"

    def to_document(self) -> dict[str, Any]:
        document: dict[str, Any] = {"fileName": self.file_name, "contentType": self.content_type,
                                    "disposition": self.disposition}
        if self.content_id is not None:
            document["contentId"] = self.content_id
        if self.s3 is not None:
            document["s3"] = {"bucket": self.s3.bucket, "key": self.s3.key}
        if self.content is not None:
            document["content"] = base64.b64encode(self.content).decode("ascii")
        return document


def guess_type(file_name: str) -> str:
    return mimetypes.guess_type(file_name, strict=False)[0] or "application/octet-stream"
