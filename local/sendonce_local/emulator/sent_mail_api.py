"""``GET /moto-api/sendonce/ses-sends``: every send the emulator's SES accepted, as JSON over HTTP, with what
moto's SES drops (the configuration set, the tags, the attachments and the headers). A test or the demo's report
reads from it what SES received; ``?since=N`` skips the first N sends.

Served by moto's own API application (the one answering ``/moto-api/reset``), so it is on the emulator's port.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .ses_parts import send_as_json
from .ses_publisher import SEND_LOG

SENDS_PATH = "/moto-api/sendonce/ses-sends"


def _ses_sends(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
    query = parse_qs(urlsplit(full_url).query)
    try:
        since = int(query.get("since", ["0"])[0])
    except ValueError:
        return 400, {"Content-Type": "application/json"}, json.dumps({"error": "since must be an integer"})
    sends = [send_as_json(send) for send in SEND_LOG.since(since)]
    return 200, {"Content-Type": "application/json"}, json.dumps({"sends": sends})


def serve_ses_sends() -> None:
    """Add the endpoint to moto's API application (idempotent; before the server answers its first /moto-api)."""
    from moto.moto_api._internal import urls

    urls.url_paths.setdefault("{0}" + SENDS_PATH + "$", _ses_sends)
