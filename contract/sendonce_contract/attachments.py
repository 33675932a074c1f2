"""The job's ``attachments``: files SES attaches to the email it builds (SESv2 ``Attachments`` in simple or
template content), and their rules.

Each attachment names its ``fileName`` (1 to 255 characters, with an extension, no path, no control character),
its ``contentType`` (``type/subtype``, at most 78 characters), its ``disposition`` (``attachment``, the default, or
``inline`` with a ``contentId`` the html refers to as ``cid:<contentId>``) and exactly one of ``content`` (the
file, base64) or ``s3`` (``{bucket, key}``: a claim check the consumer reads from the pipeline's attachments
bucket only). SES refuses files by extension (its "Unsupported attachment types"); the types those files are
served as are refused with them, and the email as SES builds it (each attachment base64-encoded, in lines) must fit
SES's 40 MB message.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import NamedTuple

# SES's total message size with SESv2 Attachments (the SES developer guide, "Working with email attachments").
MAX_MESSAGE_BYTES = 40 * 1024 * 1024
MAX_ATTACHMENTS = 50  # sendonce's bound: SES names none, and a job's list stays readable
MAX_FILE_NAME_CHARS = 255  # SESv2's AttachmentFileName
MAX_CONTENT_TYPE_CHARS = 78  # SESv2's AttachmentContentType
MAX_CONTENT_ID_CHARS = 78  # SESv2's AttachmentContentId
MAX_S3_KEY_BYTES = 1024  # S3's object key limit
ATTACHMENT = "attachment"
INLINE = "inline"
DISPOSITIONS = (ATTACHMENT, INLINE)
FIELDS = frozenset({"fileName", "contentType", "disposition", "contentId", "content", "s3"})
S3_FIELDS = frozenset({"bucket", "key"})

# The extensions SES refuses to send (SES developer guide, "Unsupported attachment types"), lower case.
REFUSED_EXTENSIONS = frozenset({
    "ade", "adp", "app", "asp", "bas", "bat", "cer", "chm", "cmd", "com", "cpl", "crt", "csh", "der", "exe",
    "fxp", "gadget", "hlp", "hta", "inf", "ins", "isp", "its", "js", "jse", "ksh", "lib", "lnk", "mad", "maf",
    "mag", "mam", "maq", "mar", "mas", "mat", "mau", "mav", "maw", "mda", "mdb", "mde", "mdt", "mdw", "mdz",
    "msc", "msh", "msh1", "msh2", "mshxml", "msh1xml", "msh2xml", "msi", "msp", "mst", "ops", "pcd", "pif", "plg",
    "prf", "prg", "reg", "scf", "scr", "sct", "shb", "shs", "sys", "ps1", "ps1xml", "ps2", "ps2xml", "psc1",
    "psc2", "tmp", "url", "vb", "vbe", "vbs", "vps", "vsmacros", "vss", "vst", "vsw", "vxd", "ws", "wsc", "wsf",
    "wsh", "xnk",
})
# The types those files travel as (IANA and the common x- names): the same file under another name is refused too.
REFUSED_CONTENT_TYPES = frozenset({
    "application/x-msdownload", "application/x-msdos-program", "application/x-ms-installer", "application/x-msi",
    "application/x-ms-shortcut", "application/hta", "application/x-bat", "application/x-javascript",
    "application/javascript", "text/javascript", "application/x-vbscript", "text/vbscript",
    "application/x-powershell", "application/x-ms-application",
})
# RFC 2045's type "/" subtype, each a token (no parameters: SES writes the Content-Type field itself).
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
CONTENT_TYPE = re.compile(rf"^{_TOKEN}/{_TOKEN}$")
# A content id SES can put in <...>: printable ASCII without spaces, angle brackets or quotes.
CONTENT_ID = re.compile(r"^[!#-;=?-~]{1,78}$")
_FILE_NAME_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f/\\\"]")


class AttachmentError(ValueError):
    """An attachment the contract refuses; ``kind`` says which rule, each with its own dead-letter reason."""

    MALFORMED = "malformed"
    ENCODING = "encoding"  # content is not base64
    TYPE_REFUSED = "type-refused"  # an extension or type SES refuses
    TOO_LARGE = "too-large"  # one attachment, or the whole message, past SES's 40 MB

    def __init__(self, reason: str, kind: str = MALFORMED) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class S3Location(NamedTuple):
    bucket: str
    key: str


class Attachment(NamedTuple):
    """A parsed attachment: ``content`` holds the file (decoded) unless it is still to be read from ``s3``."""

    file_name: str
    content_type: str
    disposition: str
    content_id: str | None
    content: bytes | None
    s3: S3Location | None

    def __repr__(self) -> str:
        # Never the content: a repr can reach a log line.
        where = f"s3://{self.s3.bucket}/{self.s3.key}" if self.s3 else f"{len(self.content or b'')} bytes"
        return f"Attachment({self.file_name!r}, {self.content_type!r}, {self.disposition}, {where})"

    def with_content(self, content: bytes) -> Attachment:
        return self._replace(content=content)


def encoded_size(size: int) -> int:
    """The bytes an attachment of ``size`` bytes takes in the message SES builds: base64, in 76-character lines."""
    encoded = 4 * math.ceil(size / 3)
    return encoded + 2 * math.ceil(encoded / 76)


def message_size(body_bytes: int, attachment_sizes: list[int]) -> int:
    """A bound of the message SES builds: the text parts, and each attachment encoded with room for its MIME
    part's own header fields."""
    return body_bytes + sum(encoded_size(size) + 1024 for size in attachment_sizes)


def check_message_size(body_bytes: int, attachments: tuple[Attachment, ...], sizes: dict[int, int]) -> None:
    """Refuses a message SES could not take; ``sizes`` gives the size of each attachment (by index) known so far."""
    for index, size in sizes.items():
        if message_size(body_bytes, [size]) > MAX_MESSAGE_BYTES:
            raise AttachmentError(
                f"attachment {attachments[index].file_name!r} is {size} bytes; with the base64 encoding SES "
                f"sends it in, it alone is over SES's {MAX_MESSAGE_BYTES // 2**20} MB message: send a link to the "
                "file instead",
                AttachmentError.TOO_LARGE)
    total = message_size(body_bytes, list(sizes.values()))
    if total > MAX_MESSAGE_BYTES:
        raise AttachmentError(
            f"the message with its {len(sizes)} attachments is about {total} bytes as SES builds it (base64); "
            f"SES takes at most {MAX_MESSAGE_BYTES // 2**20} MB: send fewer or smaller files",
            AttachmentError.TOO_LARGE)


def parse_attachments(value: object) -> tuple[Attachment, ...]:
    """The job's ``attachments`` list; raises :class:`AttachmentError`. Content ids are unique."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise AttachmentError("attachments must be a list of objects {fileName, contentType, content or s3}")
    if len(value) > MAX_ATTACHMENTS:
        raise AttachmentError(f"attachments has {len(value)} entries; at most {MAX_ATTACHMENTS}")
    parsed = tuple(_attachment(item, index) for index, item in enumerate(value))
    ids = [a.content_id.lower() for a in parsed if a.content_id is not None]
    if len(ids) != len(set(ids)):
        raise AttachmentError("two attachments share a contentId: each inline file needs its own")
    return parsed


def _attachment(item: object, index: int) -> Attachment:
    if not isinstance(item, dict):
        raise AttachmentError(f"attachments[{index}] must be an object")
    unknown = sorted(set(item) - FIELDS)
    if unknown:
        raise AttachmentError(f"attachments[{index}] has unknown fields {unknown}; allowed: {sorted(FIELDS)}")
    file_name = check_file_name(item.get("fileName"), index)
    content_type = check_content_type(item.get("contentType"), file_name)
    disposition = item.get("disposition", ATTACHMENT)
    if disposition not in DISPOSITIONS:
        raise AttachmentError(f"attachment {file_name!r}: disposition must be one of {list(DISPOSITIONS)}, "
                              f"got {disposition!r}")
    content_id = item.get("contentId")
    if disposition == INLINE:
        if not isinstance(content_id, str) or not CONTENT_ID.match(content_id):
            raise AttachmentError(f"inline attachment {file_name!r} needs a contentId of 1-{MAX_CONTENT_ID_CHARS} "
                                  "printable ASCII characters without spaces, <, > or quotes (the html refers to "
                                  "it as cid:<contentId>)")
    elif content_id is not None:
        raise AttachmentError(f"attachment {file_name!r}: a contentId is for inline attachments only")
    if ("content" in item) == ("s3" in item):
        raise AttachmentError(f"attachment {file_name!r} needs exactly one of content (base64) or s3 "
                              "({bucket, key})")
    if "s3" in item:
        return Attachment(file_name, content_type, disposition, content_id, None, _s3(item["s3"], file_name))
    return Attachment(file_name, content_type, disposition, content_id, _decode(item["content"], file_name), None)


def check_file_name(value: object, index: int = 0) -> str:
    """A name SES shows as the file's: 1-255 characters, an extension SES sends, no path or control character."""
    if not isinstance(value, str) or not value.strip():
        raise AttachmentError(f"attachments[{index}].fileName is required: the name the recipient sees, with its "
                              "extension (invoice.pdf)")
    if len(value) > MAX_FILE_NAME_CHARS:
        raise AttachmentError(f"attachment file name {value[:40]!r}... has {len(value)} characters; SES takes at "
                              f"most {MAX_FILE_NAME_CHARS}")
    if _FILE_NAME_FORBIDDEN.search(value) or value != value.strip() or value.startswith("."):
        raise AttachmentError(f"attachment file name {value!r} must be a plain name: no path (/ or \\), quote, "
                              "control character, leading dot or white space at either end")
    stem, dot, extension = value.rpartition(".")
    if not dot or not stem or not extension:
        raise AttachmentError(f"attachment file name {value!r} needs an extension (SES requires one): invoice.pdf")
    if extension.lower() in REFUSED_EXTENSIONS:
        raise AttachmentError(f"attachment {value!r}: SES refuses to send .{extension.lower()} files (its "
                              "unsupported attachment types); send a link, or the file in an archive format SES "
                              "takes", AttachmentError.TYPE_REFUSED)
    return value


def check_content_type(value: object, file_name: str) -> str:
    if not isinstance(value, str) or not CONTENT_TYPE.match(value) or len(value) > MAX_CONTENT_TYPE_CHARS:
        raise AttachmentError(f"attachment {file_name!r}: contentType must be type/subtype (application/pdf), at "
                              f"most {MAX_CONTENT_TYPE_CHARS} characters, no parameters; got {str(value)[:80]!r}")
    if value.lower() in REFUSED_CONTENT_TYPES:
        raise AttachmentError(f"attachment {file_name!r}: {value} is an executable or script type, which SES refuses "
                              "to send under any file name", AttachmentError.TYPE_REFUSED)
    return value


def _decode(value: object, file_name: str) -> bytes:
    if not isinstance(value, str):
        raise AttachmentError(f"attachment {file_name!r}: content must be a base64 string", AttachmentError.ENCODING)
    try:
        content = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentError(f"attachment {file_name!r}: content is not valid base64 (RFC 4648, no line breaks)",
                              AttachmentError.ENCODING) from None
    if not content:
        raise AttachmentError(f"attachment {file_name!r} is empty")
    return content


def _s3(value: object, file_name: str) -> S3Location:
    if not isinstance(value, dict) or set(value) != S3_FIELDS:
        raise AttachmentError(f"attachment {file_name!r}: s3 must be an object {{bucket, key}}")
    bucket, key = value["bucket"], value["key"]
    if not isinstance(bucket, str) or not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
        raise AttachmentError(f"attachment {file_name!r}: s3.bucket {str(bucket)[:80]!r} is not an S3 bucket name")
    if not isinstance(key, str) or not key or len(key.encode("utf-8")) > MAX_S3_KEY_BYTES:
        raise AttachmentError(f"attachment {file_name!r}: s3.key must be 1-{MAX_S3_KEY_BYTES} bytes")
    return S3Location(bucket, key)


# A cid: URL naming an id, ended as an attribute value or CSS url() ends it (so cid:logo2 is not a reference to logo).
_CID_REFERENCE = r"(?i:cid:){}(?=[\s\"'<>)]|$)"


def inline_references_missing(html: str | None, attachments: tuple[Attachment, ...]) -> list[str]:
    """The content ids of inline attachments the html never refers to as ``cid:<id>``: the scheme in any case, as a
    URL's is, the id exactly, as a mail client looks it up (``cid:logo`` does not show ``Logo`` everywhere)."""
    text = html or ""
    return [a.content_id for a in attachments
            if a.content_id is not None and not re.search(_CID_REFERENCE.format(re.escape(a.content_id)), text)]

