"""Which SES tenant each accepted SESv2 send named: moto's SES takes ``TenantName`` and keeps nothing of it.

A log of its own (not a field of the send log's entries), so the record of what a send carried can grow without
two patches meeting in one place.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from .wrap import wrap_once


class TenantLog:
    """The ``TenantName`` of each accepted send that named one, by SES message id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tenants: dict[str, str] = {}

    def add(self, ses_message_id: str, tenant_name: str) -> None:
        with self._lock:
            self._tenants[ses_message_id] = tenant_name

    def by_message_id(self) -> dict[str, str]:
        with self._lock:
            return dict(self._tenants)

    def clear(self) -> None:
        with self._lock:
            self._tenants.clear()


TENANT_LOG = TenantLog()


def record_ses_tenants() -> None:
    """Wrap moto's SESv2 SendEmail so each accepted send's TenantName is kept (idempotent)."""
    from moto.sesv2.responses import SESV2Response

    def keeping(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def send_email(self: Any) -> str:
            answer = original(self)
            tenant_name = json.loads(self.body).get("TenantName")
            if tenant_name:
                TENANT_LOG.add(json.loads(answer)["MessageId"], str(tenant_name))
            return str(answer)

        return send_email

    wrap_once(SESV2Response, "send_email", keeping, "log of send tenants")
