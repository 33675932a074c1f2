"""One SES event record per event type, after the examples in the SES Developer Guide ("Examples of event data
that Amazon SES publishes"): the same fields and sample values, with this pipeline's tags in ``mail.tags``, each
wrapped as EventBridge delivers it to a rule's SQS target ("Email Sent", "Email Delivered", ...). SES's acceptance
(``mail.timestamp``) is now unless a test says when: the recorder refuses an email accepted before its key's record
was claimed (the key's earlier lifetime), and the Guide's example is from 2016."""

from __future__ import annotations

import copy
import json
import time
from datetime import UTC, datetime
from typing import Any

from sendonce_contract.key_tags import PIPELINE_TAG, key_tags

ACCOUNT = "123456789012"


def mail(dedupe_key: str, ses_message_id: str, pipeline: str = "test-pipeline",
         sent_at_ms: int | None = None) -> dict[str, Any]:
    tags: dict[str, list[str]] = {
        "ses:configuration-set": ["ConfigSet"],
        "ses:source-ip": ["192.0.2.0"],
        "ses:from-domain": ["example.com"],
        "ses:caller-identity": ["ses_user"],
    }
    for name, value in [*key_tags(dedupe_key), (PIPELINE_TAG, pipeline)]:
        tags[name] = [value]
    accepted = datetime.fromtimestamp((time.time_ns() // 1_000_000 if sent_at_ms is None else sent_at_ms) / 1000, UTC)
    return {
        "timestamp": accepted.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "source": "sender@example.com",
        "sourceArn": "arn:aws:ses:us-east-1:123456789012:identity/sender@example.com",
        "sendingAccountId": ACCOUNT,
        "messageId": ses_message_id,
        "destination": ["recipient@example.com"],
        "headersTruncated": False,
        "headers": [{"name": "From", "value": "sender@example.com"}, {"name": "To", "value": "recipient@example.com"},
                    {"name": "Subject", "value": "Message sent from Amazon SES"}],
        "commonHeaders": {"from": ["sender@example.com"], "to": ["recipient@example.com"],
                          "messageId": ses_message_id, "subject": "Message sent from Amazon SES"},
        "tags": tags,
    }


OWN_OBJECTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "Send": ("Email Sent", "send", {}),
    "Delivery": ("Email Delivered", "delivery", {
        "timestamp": "2016-10-19T23:21:04.133Z", "processingTimeMillis": 11893,
        "recipients": ["recipient@example.com"], "smtpResponse": "250 2.6.0 Message received",
        "reportingMTA": "mta.example.com"}),
    "Bounce": ("Email Bounced", "bounce", {
        "bounceType": "Permanent", "bounceSubType": "General",
        "bouncedRecipients": [{"emailAddress": "recipient@example.com", "action": "failed", "status": "5.1.1",
                               "diagnosticCode": "smtp; 550 5.1.1 user unknown"}],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
        "reportingMTA": "dsn; mta.example.com"}),
    "Complaint": ("Email Complaint Received", "complaint", {
        "complainedRecipients": [{"emailAddress": "recipient@example.com"}],
        "timestamp": "2017-08-05T00:41:02.669Z",
        "feedbackId": "01000157c44f053b-61b59c11-9236-11e6-8f96-7be8aexample-000000",
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                     "Chrome/60.0.3112.90 Safari/537.36",
        "complaintFeedbackType": "abuse", "arrivalDate": "2017-08-05T00:41:02.669Z"}),
    "Reject": ("Email Rejected", "reject", {"reason": "Bad content"}),
    "DeliveryDelay": ("Email Delivery Delayed", "deliveryDelay", {
        "timestamp": "2020-06-16T00:15:40.641Z", "delayType": "MailboxFull",
        "expirationTime": "2020-06-16T00:25:40.914Z",
        "delayedRecipients": [{"emailAddress": "recipient@example.com", "status": "4.2.2",
                               "diagnosticCode": "smtp; 452 4.2.2 The email account that you tried to reach is "
                                                 "over quota. Please direct the recipient to try again later."}]}),
    "Rendering Failure": ("Email Rendering Failed", "failure", {
        "errorMessage": "Attribute 'attributeName' is not present in the rendering data.",
        "templateName": "MyTemplate"}),
}


def ses_event(event_type: str, dedupe_key: str, ses_message_id: str, pipeline: str = "test-pipeline",
              sent_at_ms: int | None = None) -> dict:
    detail_type, name, own = OWN_OBJECTS[event_type]
    return {
        "version": "0", "id": "5e3d8e39-8ff2-4b6a-a5f2-1f3e0a8a1b2c", "detail-type": detail_type,
        "source": "aws.ses", "account": ACCOUNT, "time": "2016-10-19T23:20:53Z", "region": "us-east-1",
        "resources": ["arn:aws:ses:us-east-1:123456789012:configuration-set/ConfigSet"],
        "detail": {"eventType": event_type, "mail": mail(dedupe_key, ses_message_id, pipeline, sent_at_ms),
                   name: copy.deepcopy(own)},
    }


def sqs_records(*events: dict | str) -> dict[str, Any]:
    return {"Records": [{"messageId": f"evidence-{n}", "receiptHandle": f"handle-{n}",
                         "body": e if isinstance(e, str) else json.dumps(e),
                         "attributes": {"ApproximateReceiveCount": "1"},
                         "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:evidence"}
                        for n, e in enumerate(events)]}
