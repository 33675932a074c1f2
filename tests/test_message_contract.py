"""The message contract: what a job may say, and the error a producer's mistake gets."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from consumer_harness import job

from sendonce_contract.address import Mailbox
from sendonce_contract.message import (
    FIELDS,
    InvalidMessage,
    RawContent,
    SimpleContent,
    TemplateContent,
    parse_job,
)

SCHEMA = Path(__file__).resolve().parents[1] / "contract" / "sendonce_contract" / "message.schema.json"


def parse(body: dict) -> object:
    return parse_job(json.dumps(body), "sqs-message-id-1")


def test_simple_job_parses_with_display_names_and_a_string_recipient():
    parsed = parse(job("receipt:1:u1", to="Ada <ada@example.org>", html="<p>hi</p>"))
    assert parsed.to == (Mailbox("ada", "example.org", "Ada"),)
    assert parsed.content == SimpleContent("Receipt receipt:1:u1", "<p>hi</p>", "Thanks for your order.")


def test_template_and_raw_jobs_parse():
    body = {k: v for k, v in job("k").items() if k not in ("subject", "text")}
    template = parse(dict(body, template={"name": "receipt", "data": {"total": "9.99"}}))
    raw = parse(dict(body, raw=base64.b64encode(b"Subject: hi\r\n\r\nbody").decode()))
    assert template.content == TemplateContent("receipt", '{"total":"9.99"}')
    assert raw.content == RawContent(b"Subject: hi\r\n\r\nbody")


def test_payload_hash_ignores_key_order_and_the_delivery_field():
    a = parse(job("k", delivery="resend-without-evidence"))
    b = parse_job(json.dumps(dict(reversed(list(job("k").items())))), "m")
    assert a.payload_hash == b.payload_hash
    assert parse(job("k", text="other")).payload_hash != a.payload_hash


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "body is not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ({"from": "a@example.com"}, "dedupeKey is required"),
        (job(""), "dedupeKey is required"),
        (job("k" * 1025), "dedupeKey is 1025 bytes; the limit is 1024"),
        (job("é" * 513), "dedupeKey is 1026 bytes"),
        (job("sqs-message-id-1"), "must name the outcome"),
        (job("k", subjekt="typo"), "unknown fields ['subjekt']"),
        (job("k", **{"from": "not an address"}), "from 'not an address' is not a valid email address"),
        (job("k", **{"from": None}), "from must be an email address string and is required"),
        (job("k", to=["ada@example.org\r\nBcc: evil@example.net"]), "line break"),
        (job("k", to=[]), "0 recipients; 1 to 50 are allowed"),
        (job("k", to=[f"u{i}@example.org" for i in range(51)]), "51 recipients"),
        (job("k", to="ada@localhost"), "not a valid email address"),
        (job("k", template={"name": "t"}), "exactly one of simple content"),
        ({k: v for k, v in job("k").items() if k not in ("subject", "text")}, "got none"),
        (job("k", text=None), "needs html or text"),
        (job("k", subject=""), "subject must be a non-empty string"),
        (job("k", delivery="exactly-once"), "delivery must be one of ['resend-without-evidence', 'never-resend'"),
        (job("k", tags={"bad tag": "x"}), "SES's rule"),
        (job("k", tags={"sendonce-key": "x"}), "reserved"),
        (job("k", configurationSet=""), "configurationSet '' must be 1-64 letters, digits"),
    ],
)
def test_invalid_jobs_are_refused_with_a_reason(body, reason):
    with pytest.raises(InvalidMessage) as error:
        parse_job(body if isinstance(body, str) else json.dumps(body), "sqs-message-id-1")
    assert reason in error.value.reason


def test_template_and_raw_errors_name_the_problem():
    base = {k: v for k, v in job("k").items() if k not in ("subject", "text")}
    cases = [
        (dict(base, template={"name": "t", "vars": {}}), "unknown template fields ['vars']"),
        (dict(base, template={"name": "t", "data": [1]}), "template.data must be an object"),
        (dict(base, raw="***"), "raw is not valid base64"),
    ]
    for body, reason in cases:
        with pytest.raises(InvalidMessage, match=reason.replace("[", r"\[").replace("]", r"\]")):
            parse(body)


def test_an_invalid_job_still_reports_its_key_for_the_dlq():
    with pytest.raises(InvalidMessage) as error:
        parse(job("receipt:9:u1", to=[]))
    assert error.value.dedupe_key == "receipt:9:u1"


def test_the_json_schema_documents_exactly_the_fields_the_parser_accepts():
    schema = json.loads(SCHEMA.read_text())
    assert set(schema["properties"]) == set(FIELDS)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["dedupeKey", "from"]
