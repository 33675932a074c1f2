"""Attachments and headers: what a job carries is exactly what SES receives (read over HTTP from the emulator's
SES), every input the contract refuses is dead-lettered with its own reason and nothing sent, an s3 claim check is
uploaded once by the producer and attached by the consumer, S3's trouble delays a job and never dead-letters it,
and no attachment content reaches the ledger, a log line, a dead letter's attributes or SES's tags."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from datetime import date, timedelta

import boto3
import pytest
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from slow_aws import consumer as slow_consumer

from sendonce_contract.attachments import MAX_MESSAGE_BYTES
from sendonce_local.emulator.slow_services import LATE, Rule
from sendonce_producer import (
    Attachment,
    AttachmentStore,
    EmailJob,
    InvalidJob,
    Pipeline,
    entity_ref_id,
    one_click_unsubscribe,
)
from sendonce_runtime.outcome_log import OutcomeLog

BUCKET = "shop-attachments"
PDF = b"%PDF-1.7\n" + bytes(range(256)) * 8
LOGO = b"\x89PNG\r\n\x1a\n" + b"logo" * 100
MARKER = b"CONTENT-MARKER-8f1d2c-never-logged"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def receipt(key: str, **overrides) -> dict:
    return job(key, **{"html": '<p>Thanks</p><img src="cid:logo">', **overrides})


def invoice(content: bytes = PDF, **fields) -> dict:
    return {"fileName": "invoice-8891.pdf", "contentType": "application/pdf", "content": b64(content), **fields}


def logo() -> dict:
    return {"fileName": "logo.png", "contentType": "image/png", "disposition": "inline", "contentId": "logo",
            "content": b64(LOGO)}


def handle(consumer, body: dict) -> dict:
    log = io.StringIO()
    consumer.log = OutcomeLog(log)
    response = consumer.handle(event(sqs_record(body)), FakeContext(FakeClock()))
    assert response == {"batchItemFailures": []}
    return json.loads(log.getvalue().splitlines()[-1])


def reason_code(dead_letter: dict) -> str:
    return dead_letter["MessageAttributes"]["sendonce.reasonCode"]["StringValue"]


@pytest.fixture
def bucket(aws):
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=BUCKET)
    return s3


def test_ses_receives_exactly_the_attachments_and_headers_a_job_carries(pipeline, aws):
    headers = {**entity_ref_id("reset-77"), **one_click_unsubscribe("https://shop.example/u/77"),
               "In-Reply-To": "<case-12@support.example>"}
    body = receipt("receipt:a1:u1", attachments=[invoice(), logo()], headers=headers)
    assert handle(pipeline.consumer(), body)["outcome"] == "sent"

    [send] = aws.ses_sends()
    assert send["subject"] == "Receipt receipt:a1:u1"
    assert send["headers"] == [[name, value] for name, value in headers.items()]
    assert send["attachments"] == [
        {"fileName": "invoice-8891.pdf", "contentType": "application/pdf", "disposition": "ATTACHMENT",
         "contentId": None, "size": len(PDF), "sha256": hashlib.sha256(PDF).hexdigest()},
        {"fileName": "logo.png", "contentType": "image/png", "disposition": "INLINE", "contentId": "logo",
         "size": len(LOGO), "sha256": hashlib.sha256(LOGO).hexdigest()},
    ]
    assert aws.ses_sends(since=1) == []


def test_a_header_value_as_long_as_ses_takes_is_sent_and_one_character_more_is_refused_with_the_reason(pipeline, aws):
    """SES takes a header value of up to 995 characters since March 2026 (870 before): the longest goes out as it
    is, one more is refused by the producer and dead-lettered by the consumer, each with the reason."""
    longest = "v" * 995
    body = receipt("receipt:a3:u1", headers={"X-Campaign": longest})
    assert handle(pipeline.consumer(), body)["outcome"] == "sent"
    [send] = aws.ses_sends()
    assert send["headers"] == [["X-Campaign", longest]]
    with pytest.raises(InvalidJob, match="header 'X-Campaign' has 996 characters; SES takes at most 995"):
        EmailJob(dedupe_key="receipt:a4:u1", sender="shop@example.com", to=["ada@example.org"], subject="Hi",
                 text="Hi", headers={"X-Campaign": longest + "v"})
    line = handle(pipeline.consumer(), receipt("receipt:a4:u1", headers={"X-Campaign": longest + "v"}))
    assert line["outcome"] == "invalid_message" and "SES takes at most 995" in line["reason"]
    [dead] = pipeline.dead_letters()
    assert reason_code(dead) == "invalid-message" and aws.ses_sends(since=1) == []


def test_an_inline_reference_takes_the_cid_scheme_in_any_case_and_the_content_id_exactly(pipeline, aws):
    outcome = handle(pipeline.consumer(), receipt("receipt:a5:u1", html='<img src="CID:logo">', attachments=[logo()]))
    assert outcome["outcome"] == "sent"
    [send] = aws.ses_sends()
    assert [a["contentId"] for a in send["attachments"]] == ["logo"]


def test_a_job_without_attachments_or_headers_sends_neither(pipeline, aws):
    assert handle(pipeline.consumer(), job("receipt:a2:u1"))["outcome"] == "sent"
    [send] = aws.ses_sends()
    assert send["attachments"] == [] and send["headers"] == []


S3_MISSING = {"fileName": "invoice.pdf", "contentType": "application/pdf",
              "s3": {"bucket": BUCKET, "key": "attachments/none/0"}}
BAD_INPUTS = {
    "bad base64": ({"attachments": [invoice() | {"content": "not base64!"}]}, "attachment-encoding"),
    "refused extension": ({"attachments": [invoice() | {"fileName": "setup.exe"}]}, "attachment-type-refused"),
    "refused type": ({"attachments": [invoice() | {"contentType": "application/x-msdownload"}]},
                     "attachment-type-refused"),
    "path in the file name": ({"attachments": [invoice() | {"fileName": "../invoice.pdf"}]}, "invalid-message"),
    "inline not in the html": ({"html": "<p>no image</p>", "attachments": [logo()]}, "invalid-message"),
    "inline referred to in another case": ({"attachments": [logo() | {"contentId": "Logo"}]}, "invalid-message"),
    "inline named only inside a longer id": ({"html": '<img src="cid:logo2">', "attachments": [logo()]},
                                             "invalid-message"),
    "both content and s3": ({"attachments": [invoice() | {"s3": S3_MISSING["s3"]}]}, "invalid-message"),
    "a header SES sets": ({"headers": {"Message-ID": "<x@example.org>"}}, "header-refused"),
    "a content header": ({"headers": {"Content-Type": "text/plain"}}, "header-refused"),
    "one-click without its URL": ({"headers": {"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                                               "List-Unsubscribe": "<mailto:u@shop.example>"}}, "header-refused"),
    "a header on two lines": ({"headers": {"X-Ref": "a\r\nBcc: victim@example.net"}}, "invalid-message"),
    "a header name with a colon": ({"headers": {"X-Ref:": "a"}}, "invalid-message"),
    "an s3 attachment without a bucket": ({"attachments": [S3_MISSING]}, "attachment-bucket-refused"),
}


@pytest.mark.parametrize("change", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_each_refused_input_is_dead_lettered_with_its_own_reason_and_nothing_sent(pipeline, aws, change):
    changes, code = change
    key = "receipt:bad:u1"
    outcome = handle(pipeline.consumer(), receipt(key, **changes))
    assert outcome["reason"]
    [dead] = pipeline.dead_letters()
    assert reason_code(dead) == code
    assert aws.ses_sends() == [] and pipeline.ledger_item(key) is None


def test_raw_content_refuses_attachments_and_headers_with_the_reason(pipeline):
    raw = b64(b"From: a@example.com\r\nTo: b@example.org\r\nSubject: x\r\n\r\nhi")
    for extra in ({"attachments": [invoice()]}, {"headers": {"X-Ref": "1"}}):
        body = {"dedupeKey": "receipt:raw:u1", "from": "receipts@example.com", "to": "ada@example.org", "raw": raw,
                **extra}
        outcome = handle(pipeline.consumer(), body)
        assert outcome["outcome"] == "invalid_message" and "raw" in outcome["reason"]


@pytest.mark.parametrize("days_ahead", [None, 1], ids=["now", "scheduled"])
def test_an_s3_attachment_outside_the_pipelines_bucket_is_refused_unread(pipeline, aws, bucket, days_ahead):
    """Refused when it arrives, a scheduled job too: it does not wait out its sendAt to be refused then."""
    scheduled = {} if days_ahead is None else {"sendAt": f"{date.today() + timedelta(days=days_ahead)}T23:59:00Z"}
    elsewhere = S3_MISSING | {"s3": {"bucket": "someone-elses", "key": "k"}}
    outcome = handle(pipeline.consumer(attachments_bucket=BUCKET),
                     receipt("receipt:b1:u1", attachments=[elsewhere], **scheduled))
    assert outcome["outcome"] == "attachment_bucket_refused" and BUCKET in outcome["reason"]
    assert reason_code(pipeline.dead_letters()[0]) == "attachment-bucket-refused" and aws.ses_sends() == []


def test_a_missing_s3_object_is_dead_lettered_at_once_unclaimed(pipeline, aws, bucket):
    outcome = handle(pipeline.consumer(attachments_bucket=BUCKET), receipt("receipt:m1:u1", attachments=[S3_MISSING]))
    assert outcome["outcome"] == "attachment_missing"
    assert reason_code(pipeline.dead_letters()[0]) == "attachment-missing"
    assert aws.ses_sends() == [] and pipeline.ledger_item("receipt:m1:u1") is None


def test_an_s3_attachment_past_ses_message_size_is_refused_without_downloading_it(pipeline, aws, bucket):
    size = MAX_MESSAGE_BYTES * 3 // 4 + 1  # base64 makes it pass 40 MB
    bucket.put_object(Bucket=BUCKET, Key="attachments/big", Body=b"\0" * size)
    big = S3_MISSING | {"s3": {"bucket": BUCKET, "key": "attachments/big"}}
    outcome = handle(pipeline.consumer(attachments_bucket=BUCKET), receipt("receipt:big:u1", attachments=[big]))
    assert outcome["outcome"] == "attachment_too_large" and str(size) in outcome["reason"]
    assert reason_code(pipeline.dead_letters()[0]) == "attachment-too-large" and aws.ses_sends() == []


def producer_pipeline(jobs, s3, limit: int = 1024) -> Pipeline:
    return Pipeline(queue_url=jobs.url, table_name="dedupe", attachments_bucket=BUCKET,
                    attachment_inline_limit_bytes=limit, s3=s3)


def test_the_claim_check_is_uploaded_once_by_a_retried_producer_and_attached_by_the_consumer(
        pipeline, aws, bucket, jobs, tmp_path):
    puts: list[str] = []  # every put's key
    refused: list[int] = []  # the status of each put S3 refused: a refused put writes nothing

    def put(params, **_):
        assert params.get("IfNoneMatch") == "*", "a claim check is put only if no object has its key"
        puts.append(params["Key"])

    def answered(http_response, **_):
        if http_response.status_code != 200:
            refused.append(http_response.status_code)

    bucket.meta.events.register("before-parameter-build.s3.PutObject", put)
    bucket.meta.events.register("after-call.s3.PutObject", answered)
    path = tmp_path / "invoice-8891.pdf"
    path.write_bytes(PDF)
    email = EmailJob("receipt:s1:u1", "Shop <receipts@example.com>", ["ada@example.org"], subject="Receipt",
                     html='<img src="cid:logo">',
                     attachments=[Attachment.from_path(path),
                                  Attachment.from_bytes(LOGO, "logo.png", content_id="logo")])
    producer = producer_pipeline(jobs, bucket)
    producer.enqueue(email)
    producer.enqueue(email)  # the producer retried: same object, written once
    assert refused == [412] and len(set(puts)) == 1 and puts[0].endswith(hashlib.sha256(PDF).hexdigest())
    assert "receipt:s1:u1" not in puts[0]

    records = jobs.receive()
    assert len(records) == 2
    claim_check = json.loads(records[0]["body"])["attachments"][0]
    assert claim_check["s3"] == {"bucket": BUCKET, "key": puts[0]} and "content" not in claim_check
    built = pipeline.consumer(attachments_bucket=BUCKET)
    assert built.handle(event(*records), FakeContext(FakeClock())) == {"batchItemFailures": []}
    [send] = aws.ses_sends()  # the second copy is a duplicate
    assert [(a["fileName"], a["size"], a["sha256"]) for a in send["attachments"]] == [
        ("invoice-8891.pdf", len(PDF), hashlib.sha256(PDF).hexdigest()),
        ("logo.png", len(LOGO), hashlib.sha256(LOGO).hexdigest())]


def test_under_key_privacy_the_object_key_never_shows_the_dedupe_key(aws, bucket):
    secret = boto3.client("secretsmanager").create_secret(Name="k", SecretString="s" * 32)["ARN"]
    store = AttachmentStore(BUCKET, bucket, key_secret_arn=secret)
    key = store.object_key("receipt:p1:ada@example.org", PDF)
    assert key.startswith("attachments/hmac-") and "ada" not in key and "p1" not in key


@pytest.mark.parametrize("fault", [Rule("s3", "GetObject", "SlowDown", 503), Rule("s3", "GetObject", LATE)],
                         ids=["throttled", "slow"])
def test_s3_trouble_delays_the_job_never_dead_letters_it(pipeline, aws, bucket, slow, jobs, fault):
    bucket.put_object(Bucket=BUCKET, Key="attachments/inv", Body=PDF)
    claim_check = S3_MISSING | {"s3": {"bucket": BUCKET, "key": "attachments/inv"}}
    jobs.enqueue(receipt("receipt:t1:u1", attachments=[claim_check]))
    [record] = jobs.receive()
    built, log = slow_consumer(pipeline, slow, jobs, FakeClock(), attachments_bucket=BUCKET)
    slow.fault(fault)
    response = built.handle(event(record), FakeContext(FakeClock()))
    jobs.acknowledge(response, record)
    assert response == {"batchItemFailures": []}  # a delayed copy replaces it: no receive spent
    [line] = [json.loads(text) for text in log.getvalue().splitlines()]
    assert line["outcome"] == "attachment_unavailable" and line["AttachmentReadRetries"] == 1
    assert line["postponedSeconds"] >= 1
    assert pipeline.ledger_item("receipt:t1:u1") is None and aws.ses_sends() == []

    slow.clear()
    [copy] = jobs.receive()
    assert built.handle(event(copy), FakeContext(FakeClock())) == {"batchItemFailures": []}
    [send] = aws.ses_sends()
    assert send["attachments"][0]["sha256"] == hashlib.sha256(PDF).hexdigest()
    assert pipeline.dead_letters() == []


def test_attachment_content_never_reaches_the_ledger_logs_dead_letter_attributes_or_tags(pipeline, aws):
    secret = [b64(MARKER), MARKER.decode()]
    consumer = pipeline.consumer()
    sent = handle(consumer, receipt("receipt:c1:u1", attachments=[invoice(MARKER)]))
    refused = handle(consumer, receipt("receipt:c2:u1", attachments=[invoice(MARKER)], headers={"From": "x"}))
    assert sent["outcome"] == "sent" and refused["outcome"] == "header_refused"
    [dead] = pipeline.dead_letters()
    texts = [json.dumps(sent), json.dumps(refused), json.dumps(pipeline.ledger_item("receipt:c1:u1")),
             json.dumps(dead["MessageAttributes"]), json.dumps(aws.ses_sends()[0]["tags"])]
    assert not [text for text in texts if any(s in text for s in secret)]


def test_the_producer_refuses_what_the_consumer_would_dead_letter():
    def email(**fields):
        return EmailJob("receipt:x:u1", "receipts@example.com", ["ada@example.org"], subject="s", text="t", **fields)

    for fields in ({"attachments": [Attachment.from_bytes(b"MZ", "tool.exe")]},
                   {"headers": {"Subject": "again"}},
                   {"headers": {"List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}}):
        with pytest.raises(InvalidJob):
            email(**fields)
    with pytest.raises(ValueError, match="https"):
        one_click_unsubscribe("http://shop.example/u")
    assert json.loads(email(headers=entity_ref_id("r-1")).to_message())["contractVersion"] == 3


def test_template_content_carries_attachments_and_headers_in_sesv2s_own_shape():
    from botocore.session import get_session
    from botocore.validate import validate_parameters

    from sendonce_contract.message import parse_job
    from sendonce_runtime.ses_sender import build_request

    body = {"dedupeKey": "k", "from": "receipts@example.com", "to": "ada@example.org",
            "template": {"name": "receipt_v2", "data": {"n": 1}}, "attachments": [invoice(), logo()],
            "headers": {"X-Entity-Ref-ID": "r1"}}
    request = build_request(parse_job(json.dumps(body), "m"), None)
    template = request["Content"]["Template"]
    assert [a["FileName"] for a in template["Attachments"]] == ["invoice-8891.pdf", "logo.png"]
    assert template["Headers"] == [{"Name": "X-Entity-Ref-ID", "Value": "r1"}]
    shape = get_session().get_service_model("sesv2").operation_model("SendEmail").input_shape
    validate_parameters(request, shape)
