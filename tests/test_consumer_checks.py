"""The checks before a claim are steps the handler lists in order; a check a deployment does not use is left out of
the list when the consumer is wired (never tested per record), and its module is not even imported."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from layout import ROOT

from sendonce_contract.allowed_recipients import parse_entries
from sendonce_runtime.checks import JobAllowed
from sendonce_runtime.handler import Consumer
from sendonce_runtime.settings import Settings


def wired(**overrides):
    """The parse step, the checks and the job's rules (``JobAllowed``, the first check), by name, of a consumer
    deployed with ``overrides``; no AWS call is made."""
    settings = Settings(table_name="emails", dead_letter_queue_url="https://sqs/dlq")._replace(**overrides)
    processor = Consumer.from_clients(settings, None, None, None).processor
    job_allowed = processor.checks[0]
    assert isinstance(job_allowed, JobAllowed)
    return (type(processor.parse).__name__, [type(check).__name__ for check in processor.checks[1:]],
            [type(rule).__name__ for rule in job_allowed.rules])


CHECKS = ["Schedule", "CarriedSend", "Expiry", "SesStops"]


@pytest.mark.parametrize(("overrides", "expected"), [
    ({}, ("ParseJob", CHECKS, ["AttachmentsBucket"])),
    ({"fifo": True}, ("ParseJob", ["CarriedSend", "Expiry", "SesStops"], ["NoSendAtOnFifo", "AttachmentsBucket"])),
    ({"evidence_grace_ms": 60_000, "configuration_set": "own"},
     ("ParseJob", CHECKS, ["OwnConfigurationSet", "AttachmentsBucket"])),
    ({"allowed_recipients": parse_entries(["ada@example.org"])},
     ("ParseJob", CHECKS, ["RecipientsAllowed", "AttachmentsBucket"])),
    ({"max_send_rate": 14.0}, ("ParseJob", [*CHECKS, "PaceSends"], ["AttachmentsBucket"])),
    ({"key_secret_id": "arn:secret"}, ("ParsePrivateJob", CHECKS, ["AttachmentsBucket"])),
    ({"attachments_bucket": "shop-attachments"}, ("ParseJob", [*CHECKS, "ReadAttachments"], ["AttachmentsBucket"])),
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


def test_the_architecture_page_lists_one_send_in_at_most_fifteen_names_each_defined_and_each_default_check_among_them():
    """Issue 57's aim, held: the page's numbered list of one send is at most fifteen concepts, each opening with a
    name the runtime defines, and the default deployment's checks and rules (evidence on) are all named there."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## One send, step by step", 1)[1].split("\n## ", 1)[0]
    steps = re.findall(r"^\d+\. \*\*`([\w.]+)`\*\*", section, flags=re.MULTILINE)
    assert 0 < len(steps) <= 15 and len(steps) == len(re.findall(r"^\d+\. ", section, flags=re.MULTILINE))
    source = "\n".join(path.read_text() for path in (ROOT / "runtime" / "sendonce_runtime").glob("*.py"))
    for step in steps:
        assert re.search(rf"^\s*(class|def) {step.split('.')[-1]}\b", source, flags=re.MULTILINE), step
    _, checks, rules = wired(evidence_grace_ms=60_000, configuration_set="own")
    assert set(checks) <= set(steps) and all(f"`{rule}`" in section for rule in rules)
