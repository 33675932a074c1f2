"""For any body: dead-lettered with a reason, or an SES request that obeys SES's documented input rules.

SES's rules checked on every request the consumer builds (SESv2 SendEmail reference and the SES developer guide):
addresses are 7-bit ASCII (internationalised domains in punycode, display names RFC 2047-encoded), at most 50
recipients, tag names and values of letters, digits, underscores and hyphens (at most 256), template and
configuration set names of at most 64 such characters, and header values (subject, addresses) on one line.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from consumer_harness import FakeClock, FakeContext, event, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_contract.message import InvalidMessage, parse_job
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.ses_sender import build_request

SES_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SES_TAG = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
ADDRESS = re.compile(r"^[\x21-\x7e]{1,64}@[A-Za-z0-9.-]{1,253}$")
LINE_BREAKS = re.compile(r"[\r\n\x00]")

hostile_text = st.text(max_size=30) | st.sampled_from(
    ["", " ", "\r\n", "hi\r\nBcc: victim@example.net", "\x00", "Café", "臺網中心", "\ud800", '"', "\\", ",", ";",
     ":", "(c)", "<", ">", "[1.2.3.4]", "a" * 70, "=?utf-8?b?SGk=?="]
)
names = st.sampled_from(["Ada", "Ada Lovelace", "Café Shop", "Lovelace, Ada", "Ü" * 40]) | hostile_text
local_parts = st.sampled_from(["ada", "a.b", "a+tag", "o'neil"]) | st.sampled_from(
    [".a", "a.", "a..b", '"q"', "josé", "x" * 65, "a b", ""])
domains = st.sampled_from(["example.org", "Bücher.example", "臺網中心.tw"]) | st.sampled_from(
    ["-bad.org", "io", "a..b", "[1.2.3.4]", "x" * 64 + ".com", "example.org.", "ex ample.org"])
forms = st.sampled_from(["{a}", "{n} <{a}>", '"{n}" <{a}>', "<{a}>"]) | st.sampled_from(
    ["{a}, {a}", "{n}: {a};", "{a} ({n})", "{n} <{a}", "{a}>", "{n} <{a}> x"])
mailboxes = st.builds(lambda name, local, domain, form: form.format(n=name, a=f"{local}@{domain}"),
                      names, local_parts, domains, forms)
address_fields = mailboxes | st.lists(mailboxes, min_size=1, max_size=4) | st.lists(
    st.just("ada@example.org"), min_size=45, max_size=55)
senders = st.sampled_from(["Shop <receipts@example.com>", "receipts@example.com"]) | st.builds(
    lambda name: f"{name} <receipts@example.com>", names) | mailboxes
texts = st.sampled_from(["Thanks!", "Dein Beleg", "Ваш чек"]) | hostile_text
# A valid job with a few fields replaced: most bodies are near the boundary, where mistakes are made.
VALID = {"dedupeKey": "receipt:1:u1", "from": "Shop <receipts@example.com>", "to": ["ada@example.org"],
         "subject": "Your receipt", "text": "Thanks!"}
overrides = st.fixed_dictionaries(
    {},
    optional={
        "dedupeKey": st.sampled_from(["receipt:2:u2", "reçu 3:ユーザー"]) | hostile_text,
        "from": senders,
        "to": address_fields,
        "cc": address_fields,
        "bcc": address_fields,
        "replyTo": st.lists(mailboxes, max_size=3),
        "subject": texts,
        "html": texts,
        "template": st.fixed_dictionaries({"name": st.just("receipt_v2") | hostile_text},
                                          optional={"data": st.dictionaries(hostile_text, hostile_text, max_size=2)}),
        "configurationSet": st.just("transactional") | hostile_text,
        "tags": st.dictionaries(st.just("campaign") | hostile_text, st.just("spring-2026") | hostile_text,
                                max_size=3),
        "delivery": st.sampled_from(["never-resend", "resend-without-evidence", "at-least-once", "exactly-once"]),
    },
)
bodies = overrides.map(lambda changes: {**VALID, **changes})


def assert_obeys_ses_rules(request: dict[str, Any]) -> None:
    destination = request["Destination"]
    recipients = [a for kind in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(kind, [])]
    assert 1 <= len(recipients) <= 50
    for header in [request["FromEmailAddress"], *recipients, *request.get("ReplyToAddresses", [])]:
        assert header.isascii() and not LINE_BREAKS.search(header), header
        bare = header[header.rindex("<") + 1 : -1] if header.endswith(">") else header
        assert ADDRESS.match(bare), header
    for tag in request["EmailTags"]:
        assert SES_TAG.match(tag["Name"]) and SES_TAG.match(tag["Value"]), tag
    if "ConfigurationSetName" in request:
        assert SES_NAME.match(request["ConfigurationSetName"])
    content = request["Content"]
    if "Simple" in content:
        assert not LINE_BREAKS.search(content["Simple"]["Subject"]["Data"])
    if "Template" in content:
        assert SES_NAME.match(content["Template"]["TemplateName"])


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_an_accepted_job_always_builds_a_request_ses_accepts_as_input(body):
    try:
        job = parse_job(json.dumps(body), "sqs-message-id")
    except InvalidMessage as error:
        assert error.reason
        return
    assert_obeys_ses_rules(build_request(job, None))


def test_through_the_consumer_every_body_is_dead_lettered_with_a_reason_or_sent_as_validated(pipeline):
    """Against the emulator: what reaches SES is recorded from the real client, emails are counted in SES."""
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    requests: list[dict[str, Any]] = []
    ses = consumer.processor._sender._client
    ses.meta.events.register("before-parameter-build.sesv2.SendEmail", lambda params, **_: requests.append(params))
    sent = 0

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(body=bodies)
    def check(body):
        nonlocal sent
        body = dict(body, dedupeKey=f"{body['dedupeKey']}#{len(requests)}-{sent}")
        before = len(requests)
        response = consumer.handle(event(sqs_record(body)), FakeContext(FakeClock()))
        outcome = json.loads(log.getvalue().splitlines()[-1])
        assert response == {"batchItemFailures": []}
        assert outcome["outcome"] in ("invalid_message", "sent", "refused"), outcome
        if outcome["outcome"] == "invalid_message":
            assert outcome["reason"] and len(requests) == before
            return
        assert len(requests) == before + 1
        assert_obeys_ses_rules(requests[-1])
        sent += outcome["outcome"] == "sent"

    check()
    assert sent > 0 and len(pipeline.aws.sent_emails()) == sent
    dead = pipeline.dead_letters()
    assert all(m["MessageAttributes"]["sendonce.reason"]["StringValue"] for m in dead)
