"""The message contract: an SQS body parsed into a :class:`ParsedJob`, or an :class:`InvalidMessage` saying why not.

The JSON Schema in ``message.schema.json`` documents the same contract for producers.
"""

# No `from __future__ import annotations`: ParsedJob's field types stay objects, which the API reference resolves.
import base64
import binascii
import hashlib
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from .address import InvalidAddress, Mailbox, find_control_character, parse_mailbox
from .delivery import DeliveryPolicy
from .key_tags import DEDUPE_KEY_TAG, KEY_CHUNK_TAG, MAX_JOB_TAGS, PIPELINE_TAG
from .schema import DEDUPE_KEY, EXPIRES_AT_FIELD, PRIORITY_FIELD, TENANT_FIELD, TRACKING_FIELD, ReasonCode

if TYPE_CHECKING:
    # The rules of attachments and headers are imported by a job that has them only (see _attachments, _headers):
    # a cold start of a consumer whose jobs carry none never compiles them.
    from .attachments import Attachment

# The job contract's version this parser knows. A job names the lowest version that can carry it in ``VERSION_FIELD``
# (absent means 1, the contract of every release before the field existed): a consumer meeting a newer one puts the
# job back until it is upgraded, instead of dead-lettering fields it does not know yet.
CONTRACT_VERSION = 5
VERSION_FIELD = "contractVersion"
# The version that brought each field after the first: a job using one names at least that version.
FIELD_VERSIONS = {"sendAt": 2, TENANT_FIELD: 3, "attachments": 3, "headers": 3, PRIORITY_FIELD: 3,
                  EXPIRES_AT_FIELD: 4, TRACKING_FIELD: 5}
MAX_KEY_BYTES = 1024
MAX_RECIPIENTS = 50
FIELDS = frozenset(
    {DEDUPE_KEY, "from", "to", "cc", "bcc", "replyTo", "subject", "html", "text", "template", "raw",
     "configurationSet", "tags", "delivery", "sendAt", "attachments", "headers", VERSION_FIELD, TENANT_FIELD,
     PRIORITY_FIELD, EXPIRES_AT_FIELD, TRACKING_FIELD}
)
# Fields that say how, when or by which lane to send, or in which contract version, not what: a copy of a job
# differing only in these is the same email (one written with ``contractVersion: 1`` and one without it, too).
NOT_CONTENT = frozenset({"delivery", "sendAt", PRIORITY_FIELD, VERSION_FIELD, EXPIRES_AT_FIELD, TRACKING_FIELD})
# What a job's tracking may set, each on (true) or off (false) for its own message: SES's
# ConfigurationOverrides.Tracking (August 2026), over its configuration set's tracking.
TRACKING_SETTINGS = ("opens", "clicks")
TEMPLATE_FIELDS = frozenset({"name", "data"})
_TAG_PART = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
# SES's rule for template and configuration set names.
SES_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class InvalidMessage(ValueError):
    """The body breaks the message contract; ``reason`` says how, for the DLQ and the log, and ``code`` is the
    dead-letter reason code (``invalid-message`` unless a rule has its own, as attachments and headers do)."""

    def __init__(self, reason: str, dedupe_key: str | None = None,
                 code: ReasonCode = ReasonCode.INVALID_MESSAGE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.dedupe_key = dedupe_key
        self.code = code


class ContractTooNew(Exception):
    """The job names a contract version newer than this parser's: an upgraded producer ran ahead of its consumer.
    Not a bad job: it waits for the consumer's upgrade."""

    def __init__(self, version: int, dedupe_key: str | None) -> None:
        super().__init__(f"the job's {VERSION_FIELD} is {version}; this consumer knows {CONTRACT_VERSION} and older: "
                         "upgrade the consumer (the construct) before its producers")
        self.version = version
        self.dedupe_key = dedupe_key


class SimpleContent(NamedTuple):
    subject: str
    html: str | None
    text: str | None


class TemplateContent(NamedTuple):
    name: str
    data_json: str


class RawContent(NamedTuple):
    mime: bytes


Content = SimpleContent | TemplateContent | RawContent


class Tracking(NamedTuple):
    """A job's own open and click tracking: True on, False off, None as its configuration set has it."""

    opens: bool | None = None
    clicks: bool | None = None


class ParsedJob(NamedTuple):
    """A parsed job: every value an SES request is built from was checked here, addresses included."""

    dedupe_key: str
    from_address: Mailbox
    to: tuple[Mailbox, ...]
    content: Content
    payload_hash: str
    cc: tuple[Mailbox, ...] = ()
    bcc: tuple[Mailbox, ...] = ()
    reply_to: tuple[Mailbox, ...] = ()
    configuration_set: str | None = None
    tags: tuple[tuple[str, str], ...] = ()
    delivery: DeliveryPolicy | None = None
    send_at_ms: int | None = None  # not to be claimed before this time (epoch ms)
    expires_at_ms: int | None = None  # not sent after this time (epoch ms)
    # The customer it is sent for (sendonce_contract.tenant): content, since SES sends it as that tenant.
    tenant: str | None = None
    attachments: "tuple[Attachment, ...]" = ()  # an s3 one's content is read by the consumer before the claim
    headers: tuple[tuple[str, str], ...] = ()
    tracking: Tracking | None = None  # how SES tracks this message, over its configuration set's settings

    @property
    def s3_attachments(self) -> "tuple[Attachment, ...]":
        """The attachments whose content is still to be read from S3."""
        return tuple(a for a in self.attachments if a.content is None)
    urgent: bool = False  # the producer asked for the urgent lane (routing only: any lane sends it)


def parse_job(body: str, sqs_message_id: str) -> ParsedJob:
    """Parse an SQS body into a job; raises :class:`InvalidMessage` for anything the contract does not allow, and
    :class:`ContractTooNew` for a job of a newer contract version (checked first: its other fields may be new)."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as error:
        raise InvalidMessage(f"body is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise InvalidMessage(f"body must be a JSON object, got {type(document).__name__}")
    digest = payload_hash(document)  # first: it also refuses text that is not valid Unicode
    key = document.get(DEDUPE_KEY)
    version = contract_version(document)
    if version > CONTRACT_VERSION:
        raise ContractTooNew(version, key if isinstance(key, str) and key else None)
    if not isinstance(key, str) or not key:
        raise InvalidMessage("dedupeKey is required: a non-empty string naming the outcome, e.g. receipt:8891:u42")
    check_key(key)
    if key == sqs_message_id:
        raise InvalidMessage(
            "dedupeKey equals the SQS message id: it must name the outcome (receipt:{orderId}:{userId}), "
            "not the attempt, or a re-enqueued job is sent again"
        )
    try:
        return _parse_fields(document, key, digest)
    except InvalidMessage as error:
        raise InvalidMessage(error.reason, dedupe_key=key, code=error.code) from None


def lowest_version(document: dict[str, Any]) -> int:
    """The lowest contract version that can carry ``document``: what a producer writes as its ``contractVersion``
    (and leaves out when it is 1, so a consumer that predates the field still reads the job)."""
    return max((FIELD_VERSIONS.get(name, 1) for name in document), default=1)


def contract_version(document: dict[str, Any]) -> int:
    """The job's contract version: its ``contractVersion``, a positive integer, or 1 when absent."""
    version = document.get(VERSION_FIELD, 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise InvalidMessage(f"{VERSION_FIELD} must be a positive integer, got {version!r}")
    return version


def payload_hash(document: dict[str, Any]) -> str:
    """What the job says, independent of key order; how, when and in which contract version to send it are not
    content."""
    content = {k: v for k, v in document.items() if k not in NOT_CONTENT}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:
        raise InvalidMessage("body holds an unpaired surrogate escape (such as \\ud800): text must be valid Unicode"
                             ) from None


def check_key(key: str) -> None:
    """A key the ledger and SES's tags can carry: 1 to 1024 UTF-8 bytes, no control character, and no white
    space at either end (" a" and "a" would be two keys for what a person reads as one)."""
    if not key:
        raise InvalidMessage("dedupeKey must not be empty")
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise InvalidMessage(f"dedupeKey is {size} bytes; the limit is {MAX_KEY_BYTES}")
    if key != key.strip():
        raise InvalidMessage(f"dedupeKey {preview(key)} starts or ends with white space")
    control = next((f"U+{ord(c):04X}" for c in key if ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F), None)
    if control is not None:
        raise InvalidMessage(f"dedupeKey {preview(key)} contains a control character ({control})")


def preview(value: str, limit: int = 80) -> str:
    """How a reason quotes a value: its repr, cut at ``limit`` characters."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


def check_header_text(field_name: str, value: str) -> None:
    """Header-bearing text must stay one line: CR, LF, NUL and other control characters are refused."""
    control = find_control_character(value)
    if control is not None:
        raise InvalidMessage(
            f"{field_name} contains a control character ({control}): header fields must be one line, with no CR, "
            "LF or NUL"
        )


def _parse_fields(document: dict[str, Any], key: str, digest: str) -> ParsedJob:
    unknown = sorted(set(document) - FIELDS)
    if unknown:
        raise InvalidMessage(f"unknown fields {unknown}; allowed: {sorted(FIELDS)}")
    from_address = _address(document.get("from"), "from", required=True)
    to = _addresses(document.get("to"), "to")
    cc = _addresses(document.get("cc"), "cc")
    bcc = _addresses(document.get("bcc"), "bcc")
    recipients = len(to) + len(cc) + len(bcc)
    if not 1 <= recipients <= MAX_RECIPIENTS:
        raise InvalidMessage(f"to, cc and bcc hold {recipients} recipients; 1 to {MAX_RECIPIENTS} are allowed")
    configuration_set = document.get("configurationSet")
    if configuration_set is not None:
        _check_ses_name("configurationSet", configuration_set)
    delivery = document.get("delivery")
    try:
        policy = None if delivery is None else DeliveryPolicy(delivery)
    except ValueError:
        allowed = [p.value for p in DeliveryPolicy]
        raise InvalidMessage(f"delivery must be one of {allowed}, got {delivery!r}") from None
    content = _content(document)
    attachments, headers = _attachments(document, content), _headers(document, content)
    send_at_ms = _moment(document.get("sendAt"), "sendAt")
    expires_at_ms = _moment(document.get(EXPIRES_AT_FIELD), EXPIRES_AT_FIELD)
    if send_at_ms is not None and expires_at_ms is not None and send_at_ms > expires_at_ms:
        raise InvalidMessage(f"sendAt {document['sendAt']} is after expiresAt {document[EXPIRES_AT_FIELD]}: the job "
                             "could never be sent; schedule it before it expires, or drop expiresAt")
    return ParsedJob(
        dedupe_key=key,
        from_address=from_address,
        to=to,
        cc=cc,
        bcc=bcc,
        reply_to=_addresses(document.get("replyTo"), "replyTo"),
        content=content,
        configuration_set=configuration_set,
        tags=_tags(document.get("tags")),
        delivery=policy,
        send_at_ms=send_at_ms,
        expires_at_ms=expires_at_ms,
        tenant=_tenant(document.get(TENANT_FIELD)),
        urgent=_urgent(document.get(PRIORITY_FIELD)),
        payload_hash=digest,
        attachments=attachments,
        headers=headers,
        tracking=_tracking(document.get(TRACKING_FIELD)),
    )


def _tracking(value: object) -> Tracking | None:
    """``{"opens": false, "clicks": false}``: one or both, each true or false."""
    if value is None:
        return None
    if not isinstance(value, dict) or not value or not set(value) <= set(TRACKING_SETTINGS) or not all(
            isinstance(setting, bool) for setting in value.values()):
        raise InvalidMessage(f"{TRACKING_FIELD} must be an object with opens, clicks or both, each true or false "
                             f"(for example {{\"clicks\": false}} for a reset link), got {preview(json.dumps(value))}")
    return Tracking(opens=value.get("opens"), clicks=value.get("clicks"))


def _urgent(value: object) -> bool:
    if value is None:
        return False
    # Imported by a job that names a priority only: a cold start without lanes never compiles the module.
    from .priority import Priority

    if isinstance(value, str) and value in Priority.__members__.values():
        return Priority(value) is Priority.URGENT
    raise InvalidMessage(f"{PRIORITY_FIELD} must be one of {[p.value for p in Priority]}, got {value!r}")


def _tenant(value: object) -> str | None:
    if value is None:
        return None
    # Imported by a job that names a tenant only: a cold start without tenants never compiles the module.
    from .tenant import InvalidTenant, check_tenant

    try:
        return check_tenant(value)
    except InvalidTenant as error:
        raise InvalidMessage(str(error)) from None


def _attachments(document: dict[str, Any], content: Content) -> "tuple[Attachment, ...]":
    if "attachments" not in document:
        return ()
    from .attachments import AttachmentError, check_message_size, inline_references_missing, parse_attachments

    if isinstance(content, RawContent):
        raise InvalidMessage("attachments cannot go with raw: a raw message carries its own MIME parts; put the "
                             "files in it, or send simple or template content with attachments")
    try:
        attachments = parse_attachments(document["attachments"])
        check_message_size(body_size(content), attachments,
                           {i: len(a.content) for i, a in enumerate(attachments) if a.content is not None})
    except AttachmentError as error:
        # Each attachment rule's own dead-letter reason code.
        code = {AttachmentError.MALFORMED: ReasonCode.INVALID_MESSAGE,
                AttachmentError.ENCODING: ReasonCode.ATTACHMENT_ENCODING,
                AttachmentError.TYPE_REFUSED: ReasonCode.ATTACHMENT_TYPE_REFUSED,
                AttachmentError.TOO_LARGE: ReasonCode.ATTACHMENT_TOO_LARGE}[error.kind]
        raise InvalidMessage(error.reason, code=code) from None
    if isinstance(content, SimpleContent):
        missing = inline_references_missing(content.html, attachments)
        if missing:
            raise InvalidMessage(f"inline attachments {missing} are not referred to in html as cid:<contentId>: "
                                 "refer to each (<img src=\"cid:logo\">), or make it an attachment")
    return attachments


def _headers(document: dict[str, Any], content: Content) -> tuple[tuple[str, str], ...]:
    if "headers" not in document:
        return ()
    from .headers import HeaderError, parse_headers

    if isinstance(content, RawContent):
        raise InvalidMessage("headers cannot go with raw: a raw message carries its own header fields; write them "
                             "in it")
    try:
        return parse_headers(document["headers"])
    except HeaderError as error:
        code = ReasonCode.HEADER_REFUSED if error.refused else ReasonCode.INVALID_MESSAGE
        raise InvalidMessage(error.reason, code=code) from None


def body_size(content: Content) -> int:
    """The bytes of a job's own text parts (what a template renders to is known to SES only)."""
    if isinstance(content, SimpleContent):
        return sum(len(part.encode("utf-8")) for part in (content.subject, content.html or "", content.text or ""))
    if isinstance(content, TemplateContent):
        return len(content.data_json.encode("utf-8"))
    return len(content.mime)


def _moment(value: object, field_name: str) -> int | None:
    """An RFC 3339 time with its offset (``2026-12-24T09:00:00Z``), in epoch ms; a sendAt in the past means now."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidMessage(f"{field_name} must be an RFC 3339 time string such as 2026-12-24T09:00:00Z, got "
                             f"{value!r}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidMessage(f"{field_name} {preview(value)} is not an RFC 3339 time such as 2026-12-24T09:00:00Z"
                             ) from None
    if moment.tzinfo is None or "T" not in value.upper():
        raise InvalidMessage(f"{field_name} {preview(value)} needs a date, a time and an offset (Z or +01:00): a "
                             "time without its offset means a different instant in each time zone")
    return int(moment.timestamp() * 1000)


def _address(value: object, field_name: str, *, required: bool = False) -> Mailbox:
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"{field_name} must be an email address string" + (" and is required" if required else ""))
    try:
        return parse_mailbox(value)
    except InvalidAddress as error:
        raise InvalidMessage(f"{field_name} {preview(value)} is not a valid email address: it {error}") from None


def _addresses(value: object, field_name: str) -> tuple[Mailbox, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        raise InvalidMessage(f"{field_name} must be an address or a list of addresses")
    return tuple(_address(item, field_name) for item in items)


def _check_ses_name(field_name: str, value: object) -> str:
    if not isinstance(value, str) or not SES_NAME.match(value):
        raise InvalidMessage(
            f"{field_name} {value!r} must be 1-64 letters, digits, underscores or hyphens (SES's rule for names)"
        )
    return value


def _content(document: dict[str, Any]) -> Content:
    simple = any(k in document for k in ("subject", "html", "text"))
    kinds = [name for name, present in (("simple", simple), ("template", "template" in document),
                                        ("raw", "raw" in document)) if present]
    if len(kinds) != 1:
        raise InvalidMessage(
            f"exactly one of simple content (subject with html and/or text), template or raw is required; "
            f"got {kinds or 'none'}"
        )
    if kinds == ["template"]:
        return _template(document["template"])
    if kinds == ["raw"]:
        return _raw(document["raw"])
    return _simple(document)


def _simple(document: dict[str, Any]) -> SimpleContent:
    subject, html, text = document.get("subject"), document.get("html"), document.get("text")
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidMessage("subject must be a non-empty string")
    check_header_text("subject", subject)
    for name, value in (("html", html), ("text", text)):
        if value is not None and not isinstance(value, str):
            raise InvalidMessage(f"{name} must be a string")
    if not html and not text:
        raise InvalidMessage("simple content needs html or text (or both)")
    return SimpleContent(subject=subject, html=html or None, text=text or None)


def _template(value: object) -> TemplateContent:
    if not isinstance(value, dict):
        raise InvalidMessage("template must be an object {name, data}")
    unknown = sorted(set(value) - TEMPLATE_FIELDS)
    if unknown:
        raise InvalidMessage(f"unknown template fields {unknown}; allowed: ['data', 'name']")
    name, data = _check_ses_name("template.name", value.get("name")), value.get("data", {})
    if not isinstance(data, dict):
        raise InvalidMessage("template.data must be an object")
    return TemplateContent(name=name, data_json=json.dumps(data, separators=(",", ":"), ensure_ascii=False))


def _raw(value: object) -> RawContent:
    if not isinstance(value, str) or not value:
        raise InvalidMessage("raw must be a base64 string of a MIME message")
    try:
        mime = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessage("raw is not valid base64") from None
    if not mime:
        raise InvalidMessage("raw decodes to an empty message")
    return RawContent(mime=mime)


def _tags(value: object) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise InvalidMessage("tags must be an object of string names to string values")
    tags = []
    for name, tag_value in value.items():
        if not isinstance(tag_value, str) or not _TAG_PART.match(name) or not _TAG_PART.match(tag_value):
            raise InvalidMessage(
                f"tag {name!r}: names and values must be 1-256 characters of letters, digits, _ and - (SES's rule)"
            )
        if name in (DEDUPE_KEY_TAG, PIPELINE_TAG) or re.fullmatch(rf"{KEY_CHUNK_TAG}\d+", name):
            raise InvalidMessage(f"tag {name!r} is reserved: sendonce tags every email with its key and pipeline")
        tags.append((name, tag_value))
    if len(tags) > MAX_JOB_TAGS:
        raise InvalidMessage(f"tags has {len(tags)} entries; at most {MAX_JOB_TAGS} (SES allows 50 per email and "
                             "sendonce uses the rest)")
    return tuple(tags)
