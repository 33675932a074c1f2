"""How the emulator adds to moto's SES what SES has and moto lacks: SESv2 operations, answered as SES answers (SES's
errors, a request's JSON body), on paths moto's server is told of; and the emulator's own controls on moto's API
application, for what SES sets itself and has no API for. What is added is :mod:`.ses_account`'s (the account, the
daily quota) and :mod:`.ses_tenants`' (tenants and their reputation entities).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.exceptions import JsonRESTError
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.core.responses import BaseResponse

Backend = TypeVar("Backend", bound=BaseBackend)


class SesError(JsonRESTError):
    """An error as SES answers it: the code botocore raises, HTTP status, SES's message."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        self.code = status
        super().__init__(code, message)


def request_params(response: Any) -> dict[str, Any]:
    """The JSON object a SESv2 request carries (an empty one for no body)."""
    try:
        params = json.loads(response.body or "{}")
    except ValueError as error:
        raise SesError("BadRequestException", "The request body is not JSON.") from error
    if not isinstance(params, dict):
        raise SesError("BadRequestException", "The request body is not a JSON object.")
    return params


# SESv2 operations moto lacks, added to moto's SESV2Response: moto's server hands a request to SESv2 when one of its
# url_paths matches (its catch-all "{0}/v2/.*$" becomes a literal Flask path, so each operation's path is added),
# then calls the method named after the operation botocore's model matches by method and path.


def add_sesv2_operations(paths: Iterable[str], operations: Iterable[Callable[[Any], str]]) -> None:
    """Add ``operations`` to moto's SESv2, each a method named after its operation, answering on ``paths`` (before
    its server answers its first SESv2 request; idempotent: paths and operations are set again)."""
    from moto.sesv2 import urls
    from moto.sesv2.responses import SESV2Response

    for path in paths:
        urls.url_paths.setdefault(path, SESV2Response.dispatch)
    for operation in operations:
        setattr(SESV2Response, operation.__name__, operation)


# The emulator's own controls, for what SES sets itself (the quota, through support; its own reputation findings).

Answer = tuple[int, dict[str, str], str]


class ControlRefused(Exception):
    def __init__(self, status: int, error: str) -> None:
        super().__init__(error)
        self.status, self.error = status, error


def control(backends: BackendDict[Backend]) -> Callable[[Callable[[dict[str, Any], Backend], dict[str, Any]]],
                                                        Callable[..., Answer]]:
    """A decorator making a moto API handler of ``change``, which gets the POSTed JSON object and the backend of
    ``backends`` it names (``accountId`` and ``region``, moto's defaults when omitted) and returns the answer; a
    refusal is one line of JSON."""

    def handler(change: Callable[[dict[str, Any], Backend], dict[str, Any]]) -> Callable[..., Answer]:
        @functools.wraps(change)
        def handle(request: Any, full_url: str, headers: Any) -> Answer:
            try:
                if request.method != "POST":
                    raise ControlRefused(405, "POST a JSON object")
                try:
                    body = json.loads(request.get_data() or b"{}")  # any content type: curl -d sends a form's
                except ValueError as error:
                    raise ControlRefused(400, "the body is not JSON") from error
                if not isinstance(body, dict):
                    raise ControlRefused(400, "the body is not a JSON object")
                account = body.get("accountId", DEFAULT_ACCOUNT_ID)
                region = body.get("region", BaseResponse.default_region)
                if not isinstance(account, str) or not isinstance(region, str):
                    raise ControlRefused(400, "accountId and region must be strings")
                try:
                    backend = backends[account][region]
                except KeyError as error:
                    raise ControlRefused(400, f"unknown region {region}") from error
                status, answer = 200, change(body, backend)
            except ControlRefused as refused:
                status, answer = refused.status, {"error": refused.error}
            return status, {"Content-Type": "application/json"}, json.dumps(answer)

        return handle

    return handler


def serve_control(path: str, handle: Callable[..., Answer]) -> None:
    """Add a control at ``path`` to moto's API application (idempotent; before the server answers its first
    /moto-api)."""
    from moto.moto_api._internal import urls

    urls.url_paths.setdefault("{0}" + path + "$", handle)
