"""The checks before a claim are steps the handler lists in order; a check a deployment does not use is left out of
the list when the consumer is wired (never tested per record), and its module is not even imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sendonce_contract.allowed_recipients import parse_entries
from sendonce_runtime.handler import Consumer
from sendonce_runtime.settings import Settings


def wired(**overrides):
    """The parse step and the checks, by name, of a consumer deployed with ``overrides``; no AWS call is made."""
    settings = Settings(table_name="emails", dead_letter_queue_url="https://sqs/dlq")._replace(**overrides)
    processor = Consumer.from_clients(settings, None, None, None).processor
    return type(processor.parse).__name__, [type(check).__name__ for check in processor.checks]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, ("ParseJob", ["Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops"])),
    ({"fifo": True}, ("ParseJob", ["NoSendAtOnFifo", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops"])),
    ({"evidence_grace_ms": 60_000, "configuration_set": "own"},
     ("ParseJob", ["OwnConfigurationSet", "Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops"])),
    ({"allowed_recipients": parse_entries(["ada@example.org"])},
     ("ParseJob", ["RecipientsAllowed", "Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops"])),
    ({"max_send_rate": 14.0},
     ("ParseJob", ["Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops", "PaceSends"])),
    ({"key_secret_id": "arn:secret"},
     ("ParsePrivateJob", ["Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops"])),
    ({"attachments_bucket": "shop-attachments"},
     ("ParseJob", ["Schedule", "AttachmentsBucket", "CarriedSend", "Expiry", "SesStops", "ReadAttachments"])),
], ids=["default", "fifo", "ses_events", "allowed_recipients", "max_send_rate", "key_privacy", "attachments_bucket"])
def test_a_consumer_runs_only_the_checks_its_deployment_uses_in_order(overrides, expected):
    assert wired(**overrides) == expected


def test_a_deployment_without_pacing_key_privacy_an_attachments_bucket_or_a_waiting_room_never_imports_them():
    probe = ("import sys; from sendonce_runtime.handler import Consumer; "
             "from sendonce_runtime.settings import Settings; "
             "Consumer.from_clients(Settings(table_name='t', dead_letter_queue_url='q'), None, None, None); "
             "print(sorted(m for m in sys.modules "
             "if m.endswith(('.send_rate', '.key_privacy', '.attachment_reader', '.waiting_room'))))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
