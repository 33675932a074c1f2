"""An embedded AWS emulator: moto's server on a free loopback port, with the patches of :mod:`.patches` installed
(what each one patches and why is said there, once)."""

from __future__ import annotations

import logging
import os
import urllib.request
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.server import ThreadedMotoServer

from .patches import install_patches
from .ses_limits import SES_RATE
from .ses_publisher import SEND_LOG
from .sqs_fair_queues import forget_receives

DEFAULT_REGION = "us-east-1"


class LocalAws:
    """A running emulator. ``endpoint`` is ``http://localhost:PORT`` (moto's CloudFormation needs ``localhost``).

    moto keeps one state per process: two emulators started in one process see the same resources and mail.
    """

    def __init__(self, region: str = DEFAULT_REGION, account_id: str = DEFAULT_ACCOUNT_ID) -> None:
        self.region = region
        self.account_id = account_id
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.endpoint = ""

    def start(self) -> LocalAws:
        install_patches()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request drowns the output
        # moto names each CloudFormation type it skips; callers say which gaps matter to them.
        logging.getLogger("moto").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", message="Tried to parse .* not supported by moto", category=UserWarning)
        self._server.start()
        _, port = self._server.get_host_and_port()
        self.endpoint = f"http://localhost:{port}"
        return self

    def stop(self) -> None:
        self._server.stop()

    @property
    def environment(self) -> dict[str, str]:
        """What a process (the CDK CLI, a consumer, a producer) needs to talk to this emulator and nothing else."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "CDK_DEFAULT_ACCOUNT": self.account_id,
            "CDK_DEFAULT_REGION": self.region,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def reset(self) -> None:
        """Forget every resource and sent email (between tests)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        SEND_LOG.clear()
        forget_receives()
        SES_RATE.limit(None)

    def control(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to one of the emulator's own controls (``/moto-api/sendonce/...``) and return its answer;
        a refusal raises ``urllib.error.HTTPError``."""
        import json

        request = urllib.request.Request(f"{self.endpoint}{path}", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))

    def sent_emails(self) -> list[Any]:
        """What the emulator's SES accepted: moto's Message and RawMessage objects, in order."""
        from moto.ses.models import ses_backends

        return list(ses_backends[self.account_id][self.region].sent_messages)

    def ses_sends(self, since: int = 0) -> list[dict[str, Any]]:
        """What the emulator's SES accepted, read over HTTP (``GET /moto-api/sendonce/ses-sends``): each send with
        the time SES accepted it (``acceptedAt``, epoch seconds), its addresses, subject, configuration set, tags,
        SES tenant (``tenantName``, null when none), headers, attachments (name, type, disposition, content id,
        size and SHA-256) and tracking overrides (``tracking``: ``OpenTrackingEnabled``, ``ClickTrackingEnabled``)."""
        import json

        from .sent_mail_api import SENDS_PATH

        with urllib.request.urlopen(f"{self.endpoint}{SENDS_PATH}?since={since}", timeout=10) as response:
            return list(json.loads(response.read())["sends"])

    def sent_subjects(self) -> list[str]:
        """The subjects of what the emulator's SES accepted, in order (the workloads name each email's key by it)."""
        return [subject_of(message) for message in self.sent_emails()]


def subject_of(sent: Any) -> str:
    """The subject of an email the emulator's SES accepted; '' for a raw message, whose subject is inside it."""
    return str(getattr(sent, "subject", ""))


@contextmanager
def local_aws(region: str = DEFAULT_REGION, fresh: bool = True, pointed: bool = False) -> Iterator[LocalAws]:
    """Start an emulator for the ``with`` block, empty unless ``fresh`` is False; it stops on exit, on error and
    on Ctrl-C. ``pointed``: this process's environment points at it (:attr:`LocalAws.environment`) for the block,
    so every client made in it talks to the emulator, and is restored after."""
    aws = LocalAws(region=region).start()
    if fresh:
        aws.reset()  # the process's moto state may hold another emulator's resources
    saved = dict(os.environ)
    if pointed:
        os.environ.update(aws.environment)
    try:
        yield aws
    finally:
        if pointed:
            os.environ.clear()
            os.environ.update(saved)
        aws.stop()
