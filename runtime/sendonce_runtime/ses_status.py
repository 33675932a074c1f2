"""Whether SES sends again for a stopped scope, in SES's own words rather than a refusal's text (docs: when SES
stops sending, the table of which answer settles each kind). The schedule watch asks once a minute for each stop
the waiting room holds jobs for; one ``GetAccount`` a run serves every stop.

- Every kind: ``GetAccount``'s ``SendingEnabled`` true and its ``EnforcementStatus`` not ``SHUTDOWN``.
- ``quota``: and its ``SendQuota``'s ``SentLast24Hours`` below ``Max24HourSend`` (-1: no quota).
- ``paused`` of a tenant: and ``GetTenant``'s ``SendingStatus`` not ``DISABLED``.
- ``setup``: and the pipeline's identity ``VerifiedForSendingStatus`` with its custom MAIL FROM domain, if any,
  verified (``GetEmailIdentity``), and its configuration set found (``GetConfigurationSet``).
- Every kind, with the pipeline's configuration set: the set's ``SendingOptions``' ``SendingEnabled`` not false
  (``GetConfigurationSet``): a set's own pause (a ``paused`` refusal of the lane's sends) is over when the set sends
  again, whatever the account says.

An answer SES does not give (an error, a timeout) is not a yes: the stop lasts until SES says so, or until a
consumer's own probe (a send SES accepts) ends it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from .ses_sender import Stop


class SesStatus:
    """SES's answers for one run of the watch: each question asked once a run at most."""

    def __init__(self, ses: Any, sender_identity: str | None, configuration_set: str | None) -> None:
        self._ses = ses
        self._sender_identity = sender_identity
        self._configuration_set = configuration_set
        self._answers: dict[str, dict[str, Any] | None] = {}
        self._refused: dict[str, str] = {}  # the error code of a question SES answered with one

    def sends_again(self, kind: str, tenant: str | None) -> bool:
        account = self._answer("account", self._ses.get_account)
        if account is None or not account.get("SendingEnabled", True) or account.get("EnforcementStatus") == "SHUTDOWN":
            return False
        if kind == Stop.QUOTA and not _within_quota(account):
            return False
        if tenant is not None:
            answer = self._answer(f"tenant {tenant}", lambda: self._ses.get_tenant(TenantName=tenant))
            if answer is None or answer.get("Tenant", {}).get("SendingStatus") == "DISABLED":
                return False
        if kind == Stop.SETUP and self._sender_identity:
            identity = self._answer("identity", lambda: self._ses.get_email_identity(
                EmailIdentity=self._sender_identity))
            if identity is None or not identity.get("VerifiedForSendingStatus") or not _mail_from_verified(identity):
                return False
        if self._configuration_set:
            found = self._answer("configuration set", lambda: self._ses.get_configuration_set(
                ConfigurationSetName=self._configuration_set))
            # No answer is not a yes; a set not found ends no setup stop, and pauses nothing else.
            missing = self._refused.get("configuration set") == "NotFoundException"
            if found is None and (kind == Stop.SETUP or not missing):
                return False
            if found is not None and (found.get("SendingOptions") or {}).get("SendingEnabled") is False:
                return False
        return True

    def _answer(self, question: str, ask: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        """SES's answer, asked once a run; None when SES did not give one (an error, a timeout): not over."""
        if question not in self._answers:
            try:
                self._answers[question] = dict(ask())
            except ClientError as error:
                self._answers[question] = None
                self._refused[question] = str(error.response.get("Error", {}).get("Code", ""))
            except BotoCoreError:
                self._answers[question] = None
        return self._answers[question]


def _mail_from_verified(identity: dict[str, Any]) -> bool:
    """An identity's custom MAIL FROM domain, if it has one, verified (``MailFromDomainStatus`` SUCCESS)."""
    mail_from = identity.get("MailFromAttributes") or {}
    return not mail_from.get("MailFromDomain") or mail_from.get("MailFromDomainStatus") == "SUCCESS"


def _within_quota(account: dict[str, Any]) -> bool:
    try:
        most = float(account["SendQuota"]["Max24HourSend"])
        return most < 0 or float(account["SendQuota"]["SentLast24Hours"]) < most
    except (KeyError, TypeError, ValueError):
        return False
