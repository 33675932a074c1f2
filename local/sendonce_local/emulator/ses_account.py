"""SES's own stops, which moto's SES lacks: a paused account, a disabled tenant and the daily sending quota, played
in the emulator's SESv2 (same host and port, reached with a plain boto3 ``sesv2`` client) as SES documents them.
The tenants themselves, their reputation entities and the rule that disables one are :mod:`.ses_tenants`'.

What it plays:

- ``GetAccount``: ``SendingEnabled``, ``SendQuota`` (``Max24HourSend``, -1, no quota, unless the control below sets
  one;
  ``MaxSendRate``, the rate :data:`.ses_limits.SES_RATE` applies, or SES's production default of 14 when it applies
  none; ``SentLast24Hours``, the recipients of the sends this account and region's SES accepted in the last 24
  hours, SES's quotas counting recipients), ``ProductionAccessEnabled`` true and ``EnforcementStatus`` HEALTHY.
- ``GetEmailIdentity``: ``VerifiedForSendingStatus`` true for every identity moto's SES holds, the identities it
  sends from (moto answers false for each, although it sends from them).
- ``PutAccountSendingAttributes``: while sending is disabled, SendEmail answers HTTP 400 ``SendingPausedException``
  with SES's own text, and the email is not accepted.
- A configuration set's own pause: ``PutConfigurationSetSendingOptions`` (moto lacks it) pauses and resumes a set,
  ``GetConfigurationSet`` answers its ``SendingOptions``' ``SendingEnabled`` as a boolean, true unless the set was
  made or put paused (moto answered the options' object itself, an empty one, read as false, for a set made
  without them), and a SendEmail through a paused set answers HTTP 400 ``SendingPausedException``, naming the set:
  SESv2 documents no code of its own for a set's pause (SESv1's is ``ConfigurationSetSendingPausedException``),
  and its one pause code is what this plays; the text is the emulator's.
- The daily quota: a send that would take ``SentLast24Hours`` past ``Max24HourSend`` answers HTTP 400
  ``LimitExceededException`` "Daily message quota exceeded.". AWS documents no SESv2 code for it (SES v1 documents
  ``Throttling`` with that message); code written against SESv2 sees ``LimitExceededException``, which is what this
  plays. SES has no API that sets the quota (it is raised through AWS support), so the emulator has its own:
  ``POST /moto-api/sendonce/ses-account`` ``{"max24HourSend": N}``.
- A SendEmail whose ``TenantName`` names a disabled tenant answers HTTP 400 ``SendingPausedException``
  (:mod:`.ses_tenants` says when a tenant is disabled, and why that error).

SendEmail checks the account paused, then the tenant disabled, then its configuration set paused, then the daily
quota, then the sending rate
(:mod:`.ses_limits`) and the log of accepted sends (:mod:`.ses_publisher`); a refused send is neither logged nor
counted.

What it cannot play: suppression attributes, an account under review or in the sandbox, and SES's v1 API (moto's
own: its SendEmail and GetSendQuota know none of this, tenants included).

The state lives in the emulator's process, per account and region, in a moto backend: moto's own reset
(``POST /moto-api/reset``, which :meth:`.server.LocalAws.reset` calls) forgets it as it forgets moto's services, also
when the emulator runs as its own process (``sendonce-local serve``).
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend

from .ses_api import ControlRefused, SesError, add_sesv2_operations, control, request_params, serve_control
from .ses_limits import SES_RATE, _recipients
from .ses_tenant_backend import ses_tenants_backends
from .wrap import wrap_once

ACCOUNT_CONTROL_PATH = "/moto-api/sendonce/ses-account"

# No quota until a scenario sets one (SES reports -1 for an unlimited quota): the emulator's long runs (the
# benchmarks, a demo) send more than any figure would hold; SES grants each account its own.
DEFAULT_MAX_24_HOUR_SEND = -1.0
PRODUCTION_MAX_SEND_RATE = 14.0  # SES's default sending rate out of the sandbox
DAY_S = 24 * 3600.0

ACCOUNT_PAUSED = "The message can't be sent because the account's ability to send email is currently paused."
SET_PAUSED = "The message can't be sent because sending is paused for the configuration set {}."  # our wording


class SesAccountBackend(BaseBackend):
    """One account and region's SES account state. A moto backend, so moto's reset forgets it with moto's own."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.sending_enabled = True
        self.max_24_hour_send = DEFAULT_MAX_24_HOUR_SEND
        # (epoch seconds, recipients) of each send accepted here: the sends the log of accepted sends (SEND_LOG)
        # records, counted per account and region as they are accepted, so moto's reset zeroes the count (the log is
        # the process's, and only LocalAws.reset clears it)
        self._accepted: deque[tuple[float, int]] = deque()
        self._accepted_recipients = 0  # their sum, kept so a send's quota check costs no walk over the day
        self._in_flight = 0  # recipients of sends admitted and not yet accepted or refused by what runs after
        self._lock = threading.Lock()

    def sent_last_24_hours(self) -> int:
        with self._lock:
            return self._forget_older_than_a_day()

    def _forget_older_than_a_day(self) -> int:
        horizon = time.time() - DAY_S
        while self._accepted and self._accepted[0][0] < horizon:
            self._accepted_recipients -= self._accepted.popleft()[1]
        return self._accepted_recipients

    def admit(self, tenant_name: str | None, recipients: int, configuration_set: str | None = None) -> None:
        """Raise SES's error if SES would refuse the send here; otherwise hold its recipients against the quota
        until :meth:`settle` (two sends at once cannot both take the last of it)."""
        tenants = ses_tenants_backends[self.account_id][self.region_name]
        with self._lock:
            if not self.sending_enabled:
                raise SesError("SendingPausedException", ACCOUNT_PAUSED)
            tenants.check_sending(tenant_name)
            if configuration_set and self._set_paused(configuration_set):
                raise SesError("SendingPausedException", SET_PAUSED.format(configuration_set))
            if self.max_24_hour_send >= 0 and (
                    self._forget_older_than_a_day() + self._in_flight + recipients > self.max_24_hour_send):
                raise SesError("LimitExceededException", "Daily message quota exceeded.")
            self._in_flight += recipients

    def _configuration_set(self, name: str) -> Any:
        """moto's configuration set ``name`` (moto's own NotFoundException when there is none)."""
        from moto.sesv2.models import sesv2_backends

        return sesv2_backends[self.account_id][self.region_name].get_configuration_set(name)

    def _set_paused(self, name: str) -> bool:
        """Whether configuration set ``name`` is paused; a set moto does not hold is not (moto sends through it)."""
        from moto.ses.exceptions import ConfigurationSetDoesNotExist

        try:
            return not _set_sending(self._configuration_set(name))
        except ConfigurationSetDoesNotExist:
            return False

    def settle(self, recipients: int, accepted: bool) -> None:
        with self._lock:
            self._in_flight -= recipients
            if accepted:
                self._accepted.append((time.time(), recipients))
                self._accepted_recipients += recipients


ses_account_backends = BackendDict(SesAccountBackend, "sesv2")


def _backend(response: Any) -> SesAccountBackend:
    return ses_account_backends[response.current_account][response.region]


ACCOUNT_PATHS = (
    "{0}/v2/email/account$",
    "{0}/v2/email/account/sending$",
)


def get_account(self: Any) -> str:
    backend = _backend(self)
    return json.dumps({
        "SendingEnabled": backend.sending_enabled,
        "SendQuota": {"Max24HourSend": backend.max_24_hour_send,
                      "MaxSendRate": SES_RATE.rate if SES_RATE.rate is not None else PRODUCTION_MAX_SEND_RATE,
                      "SentLast24Hours": float(backend.sent_last_24_hours())},
        "ProductionAccessEnabled": True,
        "EnforcementStatus": "HEALTHY",
        "DedicatedIpAutoWarmupEnabled": False,
    })


def put_account_sending_attributes(self: Any) -> str:
    enabled = request_params(self).get("SendingEnabled", False)  # SES's default for an omitted member is false
    if not isinstance(enabled, bool):
        raise SesError("BadRequestException", "SendingEnabled must be a boolean.")
    _backend(self).sending_enabled = enabled
    return "{}"


CONFIGURATION_SET_PATHS = ("{0}/v2/email/configuration-sets/(?P<ConfigurationSetName>[^/]+)/sending$",)


def put_configuration_set_sending_options(self: Any) -> str:
    enabled = request_params(self).get("SendingEnabled", False)  # SES's default for an omitted member is false
    if not isinstance(enabled, bool):
        raise SesError("BadRequestException", "SendingEnabled must be a boolean.")
    name = urllib.parse.unquote(self.path.split("/configuration-sets/", 1)[1].split("/", 1)[0])
    _backend(self)._configuration_set(name).enabled = {"SendingEnabled": enabled}
    return "{}"


def _set_sending(configuration_set: Any) -> bool:
    """Whether a moto configuration set sends: moto keeps the SendingOptions it was made with (or {}) as ``enabled``;
    SES's default is enabled."""
    options = configuration_set.enabled
    return bool(options.get("SendingEnabled", True)) if isinstance(options, dict) else bool(options)


ACCOUNT_OPERATIONS: tuple[Callable[[Any], str], ...] = (get_account, put_account_sending_attributes,
                                                        put_configuration_set_sending_options)


def play_ses_account() -> None:
    """Add the account's operations to moto's SESv2 (before its server answers its first SESv2 request) and put the
    account's, the tenant's, the configuration set's and the quota's checks in front of its SendEmail (idempotent:
    paths and operations are set again, the wrappers once)."""
    from moto.ses.models import ConfigurationSet
    from moto.sesv2.responses import SESV2Response

    add_sesv2_operations((*ACCOUNT_PATHS, *CONFIGURATION_SET_PATHS), ACCOUNT_OPERATIONS)

    def sending_as_a_boolean(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        @functools.wraps(original)
        def to_dict_v2(self: Any) -> dict[str, Any]:
            return {**original(self), "SendingOptions": {"SendingEnabled": _set_sending(self)}}

        return to_dict_v2

    wrap_once(ConfigurationSet, "to_dict_v2", sending_as_a_boolean, "a configuration set's SendingEnabled")

    def checked(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def send_email(self: Any) -> str:
            backend = _backend(self)
            recipients = _recipients(self.body)
            params = request_params(self)
            backend.admit(params.get("TenantName") or None, recipients, params.get("ConfigurationSetName") or None)
            accepted = False
            try:
                answer = str(original(self))
                accepted = True
                return answer
            finally:
                backend.settle(recipients, accepted)

        return send_email

    wrap_once(SESV2Response, "send_email", checked, "SES's account, tenant and daily quota stops")


def answer_identities_verified() -> None:
    """An identity moto's SES holds (which it sends from) answers ``VerifiedForSendingStatus`` true in
    ``GetEmailIdentity``, as SES answers for an identity it sends from (idempotent)."""
    from moto.ses.models import EmailIdentity

    def verified(original: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(original)
        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            self.verified_for_sending_status = True

        return init

    wrap_once(EmailIdentity, "__init__", verified, "identities verified for sending")


@control(ses_account_backends)
def set_daily_quota(body: dict[str, Any], backend: SesAccountBackend) -> dict[str, Any]:
    quota = body.get("max24HourSend")
    if isinstance(quota, bool) or not isinstance(quota, int | float) or not math.isfinite(quota) or quota <= 0:
        raise ControlRefused(400, "max24HourSend must be a positive number")
    backend.max_24_hour_send = float(quota)
    return {"max24HourSend": backend.max_24_hour_send}


def serve_ses_account_control() -> None:
    """Add ``POST /moto-api/sendonce/ses-account`` to moto's API application (idempotent; before the server answers
    its first /moto-api)."""
    serve_control(ACCOUNT_CONTROL_PATH, set_daily_quota)
