"""A job's ``tenant``: the customer a platform sends it for, one rule for every part that reads or carries it.

Two AWS features use it, and the name must suit both:

- SQS fair queues (standard queues, 2025) tell tenants apart by each message's ``MessageGroupId`` (at most 128
  characters of letters, digits and punctuation), and keep one tenant's backlog from delaying the others.
- SES tenants (2025) keep each tenant's reputation and sending status apart when ``SendEmail`` names its
  ``TenantName`` (at most 64 letters, digits, ``-`` and ``_``).

SES's rule is the narrower one, so it is the tenant's rule: a name SES would take is always a group id SQS takes.

On a standard queue the tenant is the message's ``MessageGroupId``; with ``key_privacy``, its keyed digest (a
tenant name often is a customer's name, which the queue's metadata, logs and metrics should not show). On a FIFO
queue the group id already means something (one recipient's emails keep their order, see :mod:`.fifo`): the
tenant leaves it alone there, and FIFO's groups need no fairness added (SQS hands out groups in turn).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from .schema import TENANT_FIELD

__all__ = ["TENANT_FIELD", "InvalidTenant", "check_tenant", "tenant_group_id", "tenant_label"]

MAX_TENANT_CHARS = 64
# SES's rule for a tenant name (CreateTenant, AWS::SES::Tenant): also within SQS's rule for a MessageGroupId.
TENANT_NAME = re.compile(rf"^[A-Za-z0-9_-]{{1,{MAX_TENANT_CHARS}}}$")
TENANT_RULE = f"1-{MAX_TENANT_CHARS} letters, digits, underscores or hyphens (SES's rule for a tenant name)"
# What a tenant's text is prefixed with before it is digested under key_privacy. No dedupe key can start with a
# control character, so a tenant's digest never equals a key's digest, and one cannot be tested for the other.
_DIGEST_DOMAIN = "\x00tenant\x00"


class InvalidTenant(ValueError):
    """The tenant breaks :data:`TENANT_RULE`; the message says how."""


def check_tenant(value: object) -> str:
    """``value`` if it is a tenant name SES and SQS both take; else :class:`InvalidTenant`."""
    if not isinstance(value, str) or not TENANT_NAME.match(value):
        shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else repr(value[:80] + "...")
        raise InvalidTenant(f"{TENANT_FIELD} {shown} must be {TENANT_RULE}")
    return value


def digest_input(tenant: str) -> str:
    """What a key digester digests for ``tenant`` (``KeyDigester(secret)(digest_input(tenant))``)."""
    return _DIGEST_DOMAIN + tenant


def tenant_label(tenant: str | None, digest: Callable[[str], str] | None) -> str | None:
    """How the tenant appears outside the job body and SES's request (the queue's group id, logs, outcome events,
    metrics): as it is, or with ``key_privacy`` as its keyed digest (``digest`` is the pipeline's key digester)."""
    if tenant is None or digest is None:
        return tenant
    return digest(digest_input(tenant))


def tenant_group_id(tenant: str | None, digest: Callable[[str], str] | None, fifo: bool) -> str | None:
    """The ``MessageGroupId`` a job of ``tenant`` carries on a standard queue (SQS fair queues); None on a FIFO
    queue, whose group id is the recipient's (:mod:`.fifo`), and for a job without a tenant."""
    return None if fifo else tenant_label(tenant, digest)


def body_tenant(body: str) -> str | None:
    """The tenant a job's body names, for a relay that moves bodies it did not build; None when the body names none
    or one the contract refuses (the consumer dead-letters that job with its reason: a relay still moves it)."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    tenant = document.get(TENANT_FIELD) if isinstance(document, dict) else None
    return tenant if isinstance(tenant, str) and TENANT_NAME.match(tenant) else None
