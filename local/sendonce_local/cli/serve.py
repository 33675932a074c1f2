"""`sendonce-local serve`: an emulator for other processes (the CDK CLI, `sendonce-local run`, an app), until Ctrl-C."""

from __future__ import annotations

import contextlib
import signal
import threading

import boto3

from ..emulator.log import log_failed_requests
from ..emulator.server import local_aws
from ..emulator.ses_publisher import SesEventPublisher, put_on_default_bus


def serve(verbose: bool) -> int:
    """Run an emulator until Ctrl-C or SIGTERM, print the exports that point a shell at it, and play SES's events
    for every send it accepts, whichever process made it."""
    log_failed_requests(verbose)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with local_aws() as aws:
        for name, value in aws.environment.items():
            print(f"export {name}={value}")
        # SES's sends land in this process, whichever process made them: SES's events are played from here.
        events = boto3.client("events", endpoint_url=aws.endpoint, region_name=aws.region,
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        publisher = SesEventPublisher(None, put_on_default_bus(events), aws.account_id, aws.region).start()
        print("# playing SES's event publishing (the emulator's SES has none): each email sent through a "
              "configuration set gets the events SES documents (Send, then Delivery, Bounce or Complaint) on the "
              "default event bus, where a deployed stack's rules route them")
        print("# the emulator runs until Ctrl-C; one line per request it failed (--verbose: with tracebacks)",
              flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
        publisher.stop()
    return 0
