"""Sends one job with SESv2 and says what became of it: accepted, refused (retryable or not), or unknown.

The client it is given must have SDK retries off: SendEmail has no idempotency token, so a retried read timeout
is a second email. Classifying is the whole job here: only an answer from SES, or a connection that never
opened, is definite; anything that broke after the request may have left is ambiguous.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
)

from sendonce_contract.address import redact_addresses
from sendonce_contract.key_tags import PIPELINE_TAG, key_tags
from sendonce_contract.message import ParsedJob, RawContent, SimpleContent, TemplateContent, Tracking

# SES's throttling error for the 24-hour quota, as its documentation words it (the rate's is "Maximum sending rate").
QUOTA_MESSAGE = "Daily message quota exceeded"
# Refusals that a later delivery may get past: rate and quota errors, and stale credentials.
RETRYABLE_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ThrottlingException",
        "Throttling",
        "LimitExceededException",
        "ExpiredTokenException",
        "RequestExpired",
    }
)


class Stop:
    """What kind of stop a refusal names: not the job's fault, and the same for every job of its scope until SES
    sends again (docs: when SES stops sending)."""

    PAUSED = "paused"  # SES paused the account's (or a tenant's) sending
    SETUP = "setup"  # the pipeline's setup: its identity unverified, its configuration set gone, sending disabled
    QUOTA = "quota"  # the account's 24-hour quota is used up


# SES's codes for a paused sender (SESv2's, and SESv1's for an account or a configuration set).
PAUSED_CODES = frozenset({"SendingPausedException", "AccountSendingPausedException",
                          "ConfigurationSetSendingPausedException"})
# Refusals that name the pipeline's setup whatever the job: the account's sending disabled for good until an
# appeal, the MAIL FROM domain unverified, sending unauthorised for the role (a grant removed).
SETUP_CODES = frozenset({"AccountSuspendedException", "MailFromDomainNotVerifiedException",
                         "ConfigurationSetDoesNotExist", "ConfigurationSetDoesNotExistException"})
# The stops a job's own configuration set (not the pipeline's) can name: the job's fault, not the lane's.
OWN_SET_CODES = frozenset({"NotFoundException", "ConfigurationSetDoesNotExist", "ConfigurationSetDoesNotExistException",
                           "ConfigurationSetSendingPausedException"})
# What SES answered. Plain classes, not NamedTuples: each NamedTuple costs a cold start a tenth of a millisecond to
# build, and these are only told apart by type.

class Accepted:
    __slots__ = ("ses_message_id",)

    def __init__(self, ses_message_id: str) -> None:
        self.ses_message_id = ses_message_id


class Refused:
    """SES answered no, so nothing was sent."""

    __slots__ = ("code", "reason", "retryable", "stop", "stopped_tenant")

    def __init__(self, retryable: bool, code: str, reason: str, stop: str | None = None,
                 stopped_tenant: str | None = None) -> None:
        self.retryable = retryable
        self.code = code
        self.reason = reason
        self.stop = stop  # a Stop kind: SES refuses every job of the scope alike until it sends again
        self.stopped_tenant = stopped_tenant  # the stop is this SES tenant's only (GetTenant says it is DISABLED)

    @property
    def quota(self) -> bool:
        """SES's 24-hour quota is used up."""
        return self.stop == Stop.QUOTA


class Ambiguous:
    """The request may have reached SES; whether it was accepted cannot be known."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


SendOutcome = Accepted | Refused | Ambiguous


def build_request(
    job: ParsedJob, default_configuration_set: str | None, pipeline_tag: str | None = None, tenants: bool = False
) -> dict[str, Any]:
    """The SendEmail request, built from the parsed job only: addresses as SES must receive them (ASCII, punycode
    domains, RFC 2047 display names), never the producer's original strings. With ``tenants`` (``ses_tenants``)
    a job's tenant is the request's ``TenantName``: SES then sends it as that tenant, keeping its reputation apart."""
    destination = {"ToAddresses": [m.for_ses for m in job.to]}
    if job.cc:
        destination["CcAddresses"] = [m.for_ses for m in job.cc]
    if job.bcc:
        destination["BccAddresses"] = [m.for_ses for m in job.bcc]
    request: dict[str, Any] = {
        "FromEmailAddress": job.from_address.for_ses,
        "Destination": destination,
        "Content": _content(job),
        "EmailTags": [{"Name": name, "Value": value} for name, value in _tags(job, pipeline_tag)],
    }
    if job.reply_to:
        request["ReplyToAddresses"] = [m.for_ses for m in job.reply_to]
    configuration_set = job.configuration_set or default_configuration_set
    if configuration_set:
        request["ConfigurationSetName"] = configuration_set
    if tenants and job.tenant is not None:
        request["TenantName"] = job.tenant
    if job.tracking is not None:
        request["ConfigurationOverrides"] = {"Tracking": _tracking(job.tracking)}
    return request


def _tracking(tracking: Tracking) -> dict[str, str]:
    settings = {"OpenTrackingEnabled": tracking.opens, "ClickTrackingEnabled": tracking.clicks}
    return {name: "ENABLED" if on else "DISABLED" for name, on in settings.items() if on is not None}


def carries_tracking_overrides(client: Any) -> bool:
    """Whether ``client``'s SDK (in Lambda, the runtime's boto3) knows SendEmail's ``ConfigurationOverrides``
    (SES, August 2026): an older one refuses the request's member before sending anything."""
    members = client.meta.service_model.operation_model("SendEmail").input_shape.members
    return "ConfigurationOverrides" in members


def _tags(job: ParsedJob, pipeline_tag: str | None) -> list[tuple[str, str]]:
    ours = key_tags(job.dedupe_key) + ([(PIPELINE_TAG, pipeline_tag)] if pipeline_tag else [])
    return ours + list(job.tags)


def _content(job: ParsedJob) -> dict[str, Any]:
    content = job.content
    if isinstance(content, SimpleContent):
        body = {}
        if content.html is not None:
            body["Html"] = {"Data": content.html, "Charset": "UTF-8"}
        if content.text is not None:
            body["Text"] = {"Data": content.text, "Charset": "UTF-8"}
        simple = {"Subject": {"Data": content.subject, "Charset": "UTF-8"}, "Body": body}
        return {"Simple": {**simple, **_parts(job)}}
    if isinstance(content, TemplateContent):
        return {"Template": {"TemplateName": content.name, "TemplateData": content.data_json, **_parts(job)}}
    assert isinstance(content, RawContent)  # the contract refuses attachments and headers with raw
    return {"Raw": {"Data": content.mime}}


def _parts(job: ParsedJob) -> dict[str, Any]:
    """SESv2's Attachments and Headers of simple and template content: SES builds the MIME message from them."""
    parts: dict[str, Any] = {}
    if job.attachments:
        parts["Attachments"] = [_attachment(a) for a in job.attachments]
    if job.headers:
        parts["Headers"] = [{"Name": name, "Value": value} for name, value in job.headers]
    return parts


def _attachment(attachment: Any) -> dict[str, Any]:
    from sendonce_contract.attachments import INLINE  # a job with attachments has imported the module already

    assert attachment.content is not None, "an s3 attachment is read before the claim"
    entry = {"FileName": attachment.file_name, "ContentType": attachment.content_type,
             "ContentDisposition": attachment.disposition.upper(), "ContentTransferEncoding": "BASE64",
             "RawContent": attachment.content}
    if attachment.disposition == INLINE:
        entry["ContentId"] = attachment.content_id
    return entry


class SesSender:
    def __init__(
        self, client: Any, default_configuration_set: str | None = None, pipeline_tag: str | None = None,
        tenants: bool = False, sender_identity: str | None = None,
    ) -> None:
        self._client = client
        self._default_configuration_set = default_configuration_set
        self._pipeline_tag = pipeline_tag
        self._tenants = tenants
        self._sender_identity = sender_identity

    def send(self, job: ParsedJob) -> SendOutcome:
        try:
            request = build_request(job, self._default_configuration_set, self._pipeline_tag, self._tenants)
            response = self._client.send_email(**request)
        except ClientError as error:
            outcome = classify_client_error(error, job.from_address.address, self._sender_identity)
            if not isinstance(outcome, Refused) or outcome.stop is None:
                return outcome
            if _names_its_own_set(job, self._default_configuration_set, outcome):
                return Refused(retryable=False, code=outcome.code, reason=outcome.reason)  # the job's own set
            return outcome
        except (ConnectTimeoutError, EndpointConnectionError) as error:
            return Refused(retryable=True, code=type(error).__name__, reason=str(error))
        except ParamValidationError as error:
            return Refused(retryable=False, code="ParamValidationError", reason=redact_addresses(str(error)))
        except BotoCoreError as error:
            return Ambiguous(reason=f"{type(error).__name__}: {error}")
        return Accepted(ses_message_id=str(response["MessageId"]))

    def tenant_disabled(self, tenant: str) -> bool | None:
        """Whether SES reports ``tenant``'s sending DISABLED (GetTenant's SendingStatus, the aggregate of its
        reputation entity's customer-managed and SES-managed status); None when SES cannot say. SES's API
        reference names no error of its own for a disabled tenant's send, so a paused refusal of a tenant's job is
        asked about (:mod:`.ses_stops`, after the claim is released)."""
        try:
            status = self._client.get_tenant(TenantName=tenant).get("Tenant", {}).get("SendingStatus")
        except (ClientError, BotoCoreError):
            return None
        return bool(status == "DISABLED")


def classify_client_error(
    error: ClientError, from_address: str | None = None, sender_identity: str | None = None
) -> SendOutcome:
    details = error.response.get("Error", {})
    code = str(details.get("Code", "Unknown"))
    message = str(details.get("Message", ""))
    # SES's messages can name the addresses refused: this reason goes to the DLQ and the log, so they are taken out.
    reason = redact_addresses(f"{code}: {message}".strip())
    status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
    stop = stop_of(code, message, from_address, sender_identity)
    if stop is not None:
        return Refused(retryable=True, code=code, reason=reason, stop=stop)
    if code in RETRYABLE_CODES or status == 429:
        return Refused(retryable=True, code=code, reason=reason)
    if status >= 500 or status == 0:
        return Ambiguous(reason=reason)
    return Refused(retryable=False, code=code, reason=reason)


def stop_of(code: str, message: str, from_address: str | None, sender_identity: str | None) -> str | None:
    """The :class:`Stop` a refusal names, or None when it is the job's own (or a throttle)."""
    if code in PAUSED_CODES:
        return Stop.PAUSED
    if code in SETUP_CODES:
        return Stop.SETUP
    if QUOTA_MESSAGE.lower() in message.lower():
        return Stop.QUOTA
    lowered = message.lower()
    if code == "NotFoundException" and "configuration set" in lowered:
        return Stop.SETUP
    if code == "MessageRejected" and "not verified" in lowered and _names_the_sender(
            lowered, from_address, sender_identity):
        return Stop.SETUP
    return None


def _names_its_own_set(job: ParsedJob, default_configuration_set: str | None, refused: Refused) -> bool:
    """A configuration set the job named itself, not the pipeline's, missing or paused: the job's fault."""
    return (refused.stop is not None and refused.code in OWN_SET_CODES and job.configuration_set is not None
            and job.configuration_set != default_configuration_set)


def _names_the_sender(message: str, from_address: str | None, sender_identity: str | None) -> bool:
    """Whether an "unverified" refusal names the pipeline's own identity: one of the identities SES lists is the
    From address (an address of the identity's domain, or the address identity) or the identity itself. A
    recipient SES's sandbox refuses, even one of the same domain, or a From outside the identity is the job's."""
    if not sender_identity or not from_address:
        return False
    identity, sender = sender_identity.lower(), from_address.lower()
    if sender != identity and sender.rpartition("@")[2] != identity:
        return False
    listed = {word.strip(".,;:'\"()") for word in re.split(r"[\s<>,]+", message)}
    return sender in listed or identity in listed
