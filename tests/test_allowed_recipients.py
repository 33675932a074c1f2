"""allowed_recipients: a staging stage sends only to the addresses and domains it lists; any other recipient sends
the job to the DLQ with `recipient-not-allowed` and nothing is sent. Emails are counted in the emulator's SES."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template
from construct_support import build
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record

from sendonce_constructs import SES_MAILBOX_SIMULATOR, SendOnceConfigurationError
from sendonce_contract.allowed_recipients import parse_entries
from sendonce_contract.deploy_config import Env
from sendonce_contract.schema import ReasonCode

ROOT = Path(__file__).resolve().parents[1]
STAGING = parse_entries([SES_MAILBOX_SIMULATOR, "qa@example.com", "staging.example.org"])


def run(pipeline, *jobs):
    consumer = pipeline.consumer(allowed_recipients=STAGING)
    consumer.handle(event(*(sqs_record(j) for j in jobs)), FakeContext(FakeClock()))
    return consumer


def test_allowed_recipients_are_sent_to(pipeline):
    run(pipeline,
        job("k:simulator", to=["success@simulator.amazonses.com"]),
        job("k:address", to=["Q A <QA@Example.com>"]),  # case does not make another mailbox
        job("k:domain", to=["anyone@staging.example.org"], cc=["bounce@simulator.amazonses.com"]))
    assert pipeline.emails_per_key() == {"k:simulator": 1, "k:address": 1, "k:domain": 1}
    assert pipeline.dead_letters() == []


@pytest.mark.parametrize("recipients", [
    {"to": ["customer@gmail.com"]},
    {"to": ["qa@example.com"], "bcc": ["customer@gmail.com"]},  # one bad recipient is enough
    {"to": ["anyone@sub.staging.example.org"]},  # a domain allows itself, not its subdomains
    {"to": ["qa@example.com.evil.net"]},
], ids=["to", "bcc among allowed", "subdomain", "lookalike"])
def test_any_other_recipient_is_refused_to_the_dlq_and_nothing_is_sent(pipeline, recipients):
    consumer = run(pipeline, job("k:customer", **recipients))
    assert pipeline.emails_for("k:customer") == 0
    [message] = pipeline.dead_letters()
    attributes = {name: value["StringValue"] for name, value in message["MessageAttributes"].items()}
    assert attributes["sendonce.reasonCode"] == ReasonCode.RECIPIENT_NOT_ALLOWED.value == "recipient-not-allowed"
    assert "not in the pipeline's allowed_recipients" in attributes["sendonce.reason"]
    assert "gmail" not in attributes["sendonce.reason"] and "evil" not in attributes["sendonce.reason"]
    assert pipeline.ledger_item("k:customer") is None  # refused before any claim
    line = consumer.log._stream.getvalue()
    assert '"outcome": "recipient_not_allowed"' in line and '"RecipientsNotAllowed": 1' not in line  # no pipeline
    assert "gmail" not in line


def consumer_variables(pipeline, template):
    logical_id = cdk.Stack.of(pipeline).get_logical_id(pipeline.function.node.default_child)
    return template.to_json()["Resources"][logical_id]["Properties"]["Environment"]["Variables"]


def test_the_construct_hands_the_parsed_list_to_the_consumer():
    pipeline, template = build(allowed_recipients=[SES_MAILBOX_SIMULATOR, "QA@Example.com", "bücher.example"])
    variables = consumer_variables(pipeline, template)
    assert variables[Env.ALLOWED_RECIPIENTS] == "qa@example.com simulator.amazonses.com xn--bcher-kva.example"


def test_without_the_prop_every_recipient_is_allowed():
    pipeline, template = build()
    variables = consumer_variables(pipeline, template)
    assert Env.ALLOWED_RECIPIENTS not in variables


@pytest.mark.parametrize(("value", "message"), [
    ([], "allowed_recipients is empty: every job would be refused"),
    # One string is refused by the declared type, before the rule: SendOnce.InvalidPropType.
    ("qa@example.com", "allowed_recipients ('qa@example.com', a str) must be a list of str; pass a list: "
                       "allowed_recipients=['qa@example.com']"),
    (["qa@"], "allowed_recipients entry 'qa@' is not an address: it has an empty domain; each entry is a bare "
              "address (qa@example.com) or a domain (example.com)"),
    (["QA <qa@example.com>"], "allowed_recipients entry 'QA <qa@example.com>' has a display name"),
    (["exa mple.com"], "allowed_recipients entry 'exa mple.com' is not a domain"),
    (["localhost"], "allowed_recipients entry 'localhost' is not a domain"),
], ids=["empty", "one string", "no domain", "display name", "space", "dotless"])
def test_a_bad_allowed_recipients_fails_synth_with_the_fix(value, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(allowed_recipients=value)


def test_the_example_app_deploys_a_staging_stage_that_emails_the_simulator_and_the_team_only():
    spec = importlib.util.spec_from_file_location("example_app", ROOT / "examples" / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for context, expected in (({"stage": "staging"}, "qa.example.com simulator.amazonses.com"), ({}, None)):
        stack = module.build_app(context).node.find_child("SendOnceExample")
        pipeline = stack.node.find_child("Receipts")
        variables = consumer_variables(pipeline, Template.from_stack(stack))
        assert variables.get(Env.ALLOWED_RECIPIENTS) == expected
