"""For any body: dead-lettered with a reason, or an SES request that obeys SES's documented input rules.

SES's rules checked on every request the consumer builds (SESv2 SendEmail reference and the SES developer guide):
addresses are 7-bit ASCII (internationalised domains in punycode, display names RFC 2047-encoded), at most 50
recipients, tag names and values of letters, digits, underscores and hyphens (at most 256), template and
configuration set names of at most 64 such characters, and header values (subject, addresses) on one line; at
most 15 extra headers, each named by RFC 5322's field-name rule (SESv2's pattern, at most 126 characters) with one
line of printable ASCII (at most SES's own limit, read from botocore's model), none of the fields SES sets;
attachments with a file name of at most 255 characters whose extension SES sends, a type of at most 78, a
disposition SES knows, an inline one's content id (at most 78) referred to in the html, and the whole message
within SES's 40 MB.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import botocore.session
from consumer_harness import FakeClock, FakeContext, event, sqs_record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sendonce_contract.attachments import MAX_MESSAGE_BYTES, REFUSED_EXTENSIONS, encoded_size
from sendonce_contract.headers import is_reserved
from sendonce_contract.message import InvalidMessage, parse_job
from sendonce_runtime.outcome import MEANINGS, Outcome
from sendonce_runtime.outcome_log import OutcomeLog
from sendonce_runtime.ses_sender import build_request

SES_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SES_TAG = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
ADDRESS = re.compile(r"^[\x21-\x7e]{1,64}@[A-Za-z0-9.-]{1,253}$")
LINE_BREAKS = re.compile(r"[\r\n\x00]")
# Every outcome that dead-letters: the contract's refusals, each with its reason code, and SES's.
DEAD_LETTERED = frozenset(outcome.value for outcome, meaning in MEANINGS.items() if meaning.dead_letter is not None)
HEADER_NAME = re.compile(r"^[!-9;-@A-~]{1,126}$")  # SESv2's MessageHeaderName
# SESv2's MessageHeaderValue as botocore's model of the API states it (the oracle, not the contract's constant).
_SES_VALUE = botocore.session.get_session().get_service_model("sesv2").shape_for("MessageHeaderValue").metadata
HEADER_VALUE = re.compile(rf"^[ -~]{{{_SES_VALUE['min']},{_SES_VALUE['max']}}}$")

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
header_names = st.sampled_from(["X-Entity-Ref-ID", "In-Reply-To", "References", "List-Unsubscribe",
                                "List-Unsubscribe-Post", "x-entity-ref-id", "From", "BCC", "Content-Type",
                                "X-SES-Configuration-Set", "MIME-Version", "Message-Id"]) | hostile_text
header_values = st.sampled_from(["<a1@shop.example>", "<https://shop.example/u/1>", "List-Unsubscribe=One-Click",
                                 "r-" + "9" * 900, "<mailto:u@shop.example>"]) | hostile_text
file_names = st.sampled_from(["invoice.pdf", "logo.png", "setup.EXE", "a.js", "noext", ".pdf", "../x.pdf",
                              "n" * 252 + ".pdf", "n" * 260 + ".pdf", "Rechnung März.pdf"]) | hostile_text
content_types = st.sampled_from(["application/pdf", "image/png", "application/x-msdownload", "text/plain; a=b",
                                 "pdf", "a/" + "b" * 80]) | hostile_text
contents = st.sampled_from(["JVBERi0xLjc=", "aGVsbG8=", "", "not base64!", "aGVsbG8"]) | hostile_text
good_attachments = st.sampled_from([
    {"fileName": "invoice.pdf", "contentType": "application/pdf", "content": "JVBERi0xLjc="},
    {"fileName": "logo.png", "contentType": "image/png", "disposition": "inline", "contentId": "logo",
     "content": "aGVsbG8="},
    {"fileName": "Rechnung März.pdf", "contentType": "application/pdf",
     "s3": {"bucket": "shop-attachments", "key": "attachments/k/1"}},
])
# A valid attachment, or one with a field or two replaced.
attachment_items = good_attachments | st.builds(lambda good, change: {**good, **change}, good_attachments,
                                                st.fixed_dictionaries({}, optional={
                                                    "fileName": file_names, "contentType": content_types,
                                                    "disposition": st.sampled_from(["attachment", "inline",
                                                                                    "INLINE", ""]),
                                                    "contentId": st.sampled_from(["logo", "Logo", "a b", "<x>",
                                                                                  "i" * 79]) | hostile_text,
                                                    "content": contents}))
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
        "html": texts | st.just('<img src="cid:logo">'),
        "attachments": st.lists(attachment_items, max_size=3),
        "headers": st.dictionaries(header_names, header_values, max_size=4) | st.dictionaries(
            st.just("X-Ref") | hostile_text, st.just("1"), min_size=14, max_size=17),
        "template": st.fixed_dictionaries({"name": st.just("receipt_v2") | hostile_text},
                                          optional={"data": st.dictionaries(hostile_text, hostile_text, max_size=2)}),
        "configurationSet": st.just("transactional") | hostile_text,
        "tags": st.dictionaries(st.just("campaign") | hostile_text, st.just("spring-2026") | hostile_text,
                                max_size=3),
        "delivery": st.sampled_from(["never-resend", "resend-without-evidence", "at-least-once", "exactly-once"]),
    },
)
bodies = overrides.map(lambda changes: {**VALID, **changes})
parts = {
    "attachments": st.lists(attachment_items, min_size=1, max_size=4),
    "headers": st.dictionaries(header_names, header_values, min_size=1, max_size=4),
}
# A valid job whose attachments and headers vary (simple or template content), so most of them are accepted.
part_bodies = st.fixed_dictionaries(
    {"html": st.just('<img src="cid:logo">') | texts}, optional={**parts, "template": st.just({"name": "receipt_v2"})},
).map(lambda changes: {**VALID, **changes} if "template" not in changes else {
    **{k: v for k, v in VALID.items() if k not in ("subject", "text")},
    **{k: v for k, v in changes.items() if k != "html"}})


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
    carrier = content.get("Simple") or content.get("Template") or {}
    headers = carrier.get("Headers", [])
    assert len(headers) <= 15 and len({h["Name"].lower() for h in headers}) == len(headers)
    for header in headers:
        assert HEADER_NAME.match(header["Name"]) and not is_reserved(header["Name"]), header
        assert HEADER_VALUE.match(header["Value"]), header
    attachments = carrier.get("Attachments", [])
    for attachment in attachments:
        assert 1 <= len(attachment["FileName"]) <= 255 and "/" not in attachment["FileName"]
        assert attachment["FileName"].rpartition(".")[2].lower() not in REFUSED_EXTENSIONS
        assert 1 <= len(attachment["ContentType"]) <= 78 and attachment["RawContent"]
        assert attachment["ContentDisposition"] in ("ATTACHMENT", "INLINE")
        if attachment["ContentDisposition"] == "INLINE":
            assert 1 <= len(attachment["ContentId"]) <= 78
            if "Simple" in content:
                html = content["Simple"]["Body"]["Html"]["Data"]
                reference = f"(?i:cid:){re.escape(attachment['ContentId'])}(?=[\\s\"'<>)]|$)"
                assert re.search(reference, html), (attachment, html)
    assert sum(encoded_size(len(a["RawContent"])) for a in attachments) <= MAX_MESSAGE_BYTES


@settings(max_examples=600, deadline=None)
@given(bodies)
def test_an_accepted_job_always_builds_a_request_ses_accepts_as_input(body):
    try:
        job = parse_job(json.dumps(body), "sqs-message-id")
    except InvalidMessage as error:
        assert error.reason
        return
    assert_obeys_ses_rules(build_request(as_read(job), None))


def as_read(job):
    """The job as the consumer sends it: an s3 attachment's content read (a stand-in here)."""
    return job._replace(attachments=tuple(a if a.content else a.with_content(b"%PDF") for a in job.attachments))


@settings(max_examples=400, deadline=None)
@given(part_bodies)
def test_an_accepted_job_with_attachments_or_headers_builds_a_request_ses_accepts_as_input(body):
    try:
        job = parse_job(json.dumps(body), "sqs-message-id")
    except InvalidMessage as error:
        assert error.reason and error.code
        return
    assert_obeys_ses_rules(build_request(as_read(job), None))


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
        assert outcome["outcome"] in DEAD_LETTERED | {"sent"}, outcome
        if outcome["outcome"] in DEAD_LETTERED - {Outcome.REFUSED.value}:
            assert outcome["reason"] and len(requests) == before
            return
        assert len(requests) == before + 1
        assert_obeys_ses_rules(requests[-1])
        sent += outcome["outcome"] == "sent"

    check()
    assert sent > 0 and len(pipeline.aws.sent_emails()) == sent
    dead = pipeline.dead_letters()
    assert all(m["MessageAttributes"]["sendonce.reason"]["StringValue"] for m in dead)
