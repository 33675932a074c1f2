"""Plays SES's event publishing, which the emulator lacks: for each email the emulator's SES accepted through a
configuration set with an EventBridge destination, the events SES would publish, in SES's documented format.

What SES does and this plays: a ``Send`` event when it accepts an email, then what became of it per recipient,
with the SES mailbox simulator's documented outcomes (``success@`` delivered, ``bounce@`` a permanent bounce,
``complaint@`` delivered then a complaint, ``ooto@`` delivered, ``suppressionlist@`` a bounce of subtype
Suppressed); every other address is delivered. Each event is the record SES puts in an EventBridge event's
``detail`` (``eventType``, ``mail`` with ``messageId``, ``timestamp`` and ``tags``, and the event's own object),
wrapped as EventBridge does (``source`` aws.ses, ``detail-type`` "Email Sent", "Email Delivered", ...).
EventBridge delivers best effort: the faults delay, duplicate, reorder and drop events on purpose.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sendonce_contract.schema import SES_BOUNCE, SES_COMPLAINT, SES_DELIVERY, SES_EVENTS_BY_NAME, SES_SEND

from .ses_parts import SentAttachment, sent_parts
from .wrap import wrap_once

SIMULATOR_DOMAIN = "simulator.amazonses.com"


@dataclass(frozen=True)
class AcceptedSend:
    """One SendEmail the emulator's SES accepted, with what moto drops: the configuration set, the tags, the SES
    tenant it named, and what attachments (never their content) and headers it carried."""

    ses_message_id: str
    accepted_at: float  # epoch seconds
    source: str
    destinations: tuple[str, ...]
    subject: str
    configuration_set: str | None
    tags: tuple[tuple[str, str], ...]
    attachments: tuple[SentAttachment, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    tenant_name: str | None = None  # SendEmail's TenantName (SES tenants), None when the send named none
    # SendEmail's ConfigurationOverrides.Tracking (OpenTrackingEnabled, ClickTrackingEnabled), empty when none
    tracking: tuple[tuple[str, str], ...] = ()


class SendLog:
    """Every send the emulator's SES accepted, in order; filled by the patch :func:`record_ses_sends` installs."""

    def __init__(self) -> None:
        self._sends: list[AcceptedSend] = []
        self._lock = threading.Lock()

    def add(self, send: AcceptedSend) -> None:
        with self._lock:
            self._sends.append(send)

    def since(self, index: int) -> list[AcceptedSend]:
        with self._lock:
            return self._sends[index:]

    def clear(self) -> None:
        with self._lock:
            self._sends.clear()


SEND_LOG = SendLog()


def record_ses_sends() -> None:
    """Wrap moto's SESv2 SendEmail so each accepted send is logged with its configuration set, tags and tenant
    (idempotent). moto itself keeps none of them."""
    from moto.sesv2.responses import SESV2Response

    def logging(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def send_email(self: Any) -> str:
            answer = original(self)
            SEND_LOG.add(accepted_send(json.loads(self.body), json.loads(answer)["MessageId"]))
            return str(answer)

        return send_email

    wrap_once(SESV2Response, "send_email", logging, "log of accepted sends")


def accepted_send(params: dict[str, Any], message_id: str) -> AcceptedSend:
    destination = params.get("Destination", {})
    recipients = [a for kind in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(kind, [])]
    simple = params.get("Content", {}).get("Simple", {})
    attachments, headers = sent_parts(params)
    return AcceptedSend(
        ses_message_id=message_id, accepted_at=time.time(), source=str(params.get("FromEmailAddress", "")),
        destinations=tuple(recipients), subject=str(simple.get("Subject", {}).get("Data", "")),
        configuration_set=params.get("ConfigurationSetName"),
        tags=tuple((t["Name"], t["Value"]) for t in params.get("EmailTags", [])),
        attachments=attachments, headers=headers, tenant_name=params.get("TenantName") or None,
        tracking=tuple(sorted(((params.get("ConfigurationOverrides") or {}).get("Tracking") or {}).items())),
    )


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(epoch_s * 1000) % 1000:03d}Z"


def _bare(address: str) -> str:
    return address[address.rindex("<") + 1 : -1] if address.endswith(">") else address


def _mail(send: AcceptedSend, account: str, region: str) -> dict[str, Any]:
    domain = _bare(send.source).rpartition("@")[2]
    tags: dict[str, list[str]] = {"ses:configuration-set": [send.configuration_set or ""],
                                  "ses:from-domain": [domain],
                                  "ses:caller-identity": ["sendonce-consumer"]}
    for name, value in send.tags:
        tags.setdefault(name, []).append(value)
    return {
        "timestamp": _iso(send.accepted_at), "source": send.source,
        "sourceArn": f"arn:aws:ses:{region}:{account}:identity/{domain}",
        "sendingAccountId": account, "messageId": send.ses_message_id, "destination": list(send.destinations),
        "headersTruncated": False,
        "commonHeaders": {"from": [send.source], "to": list(send.destinations), "subject": send.subject},
        "tags": tags,
    }


def ses_event_records(send: AcceptedSend, account: str, region: str) -> list[dict[str, Any]]:
    """The records SES publishes for ``send``: Send first, then each recipient's outcome."""
    mail = _mail(send, account, region)
    records: list[dict[str, Any]] = [{"eventType": SES_SEND.name, "mail": mail, SES_SEND.record_object: {}}]
    later = send.accepted_at + 1.0
    by_outcome: dict[str, list[str]] = {}
    for recipient in (_bare(d) for d in send.destinations):
        local, _, domain = recipient.partition("@")
        outcome = local if domain.lower() == SIMULATOR_DOMAIN else "success"
        by_outcome.setdefault({"bounce": "bounce", "suppressionlist": "suppressed", "complaint": "complaint"}
                              .get(outcome, "delivered"), []).append(recipient)
    delivered = by_outcome.get("delivered", []) + by_outcome.get("complaint", [])
    if delivered:
        records.append({"eventType": SES_DELIVERY.name, "mail": mail, SES_DELIVERY.record_object: {
            "timestamp": _iso(later), "processingTimeMillis": 1000, "recipients": delivered,
            "smtpResponse": "250 2.6.0 Message received", "reportingMTA": "a8-70.smtp-out.amazonses.com"}})
    for subtype, kind in (("General", "bounce"), ("Suppressed", "suppressed")):
        if by_outcome.get(kind):
            records.append({"eventType": SES_BOUNCE.name, "mail": mail, SES_BOUNCE.record_object: {
                "bounceType": "Permanent", "bounceSubType": subtype, "timestamp": _iso(later),
                "feedbackId": f"{uuid.uuid4().hex}-000000", "reportingMTA": "dsn; a8-70.smtp-out.amazonses.com",
                "bouncedRecipients": [{"emailAddress": a, "action": "failed", "status": "5.1.1",
                                       "diagnosticCode": "smtp; 550 5.1.1 user unknown"} for a in by_outcome[kind]]}})
    if by_outcome.get("complaint"):
        records.append({"eventType": SES_COMPLAINT.name, "mail": mail, SES_COMPLAINT.record_object: {
            "complainedRecipients": [{"emailAddress": a} for a in by_outcome["complaint"]],
            "timestamp": _iso(later + 1), "feedbackId": f"{uuid.uuid4().hex}-000000",
            "complaintFeedbackType": "abuse", "arrivalDate": _iso(later + 1)}})
    return records


def eventbridge_event(record: dict[str, Any], account: str, region: str) -> dict[str, Any]:
    """``record`` as an EventBridge event, as a rule's SQS target receives it."""
    configuration_set = record["mail"]["tags"].get("ses:configuration-set", [""])[0]
    return {
        "version": "0", "id": str(uuid.uuid4()), "detail-type": SES_EVENTS_BY_NAME[record["eventType"]].detail_type,
        "source": "aws.ses", "account": account, "time": _iso(time.time()).replace(".000Z", "Z"), "region": region,
        "resources": [f"arn:aws:ses:{region}:{account}:configuration-set/{configuration_set}"],
        "detail": record,
    }


@dataclass(frozen=True)
class EventFaults:
    """How far from perfect the delivery of events is; shares are between 0 and 1."""

    delay_s: float = 0.2  # every event, as EventBridge's own latency
    outcome_delay_s: float = 0.5  # events after Send: the recipient's mail server answers later
    duplicate: float = 0.0  # share of events delivered twice
    reorder: bool = False  # events due together are delivered in random order
    drop: float = 0.0  # share of all events never delivered
    drop_send: float = 0.0  # share of Send events never delivered


@dataclass
class PublisherStats:
    events_published: int = 0
    send_events_dropped: list[str] = field(default_factory=list)  # SES message ids whose Send event was dropped


Deliver = Callable[[Sequence[dict[str, Any]]], None]


class SesEventPublisher:
    """Turns the sends the emulator's SES accepted through ``configuration_sets`` (None: through any configuration
    set) into events handed to
    ``deliver`` (a batch of EventBridge events). ``pump`` publishes what is due; ``start`` pumps in a thread."""

    def __init__(self, configuration_sets: Sequence[str] | None, deliver: Deliver, account: str, region: str,
                 faults: EventFaults | None = None, seed: int = 0, log: SendLog = SEND_LOG) -> None:
        self._sets = None if configuration_sets is None else set(configuration_sets)  # None: every set
        self._deliver = deliver
        self._account, self._region = account, region
        self.faults = faults or EventFaults()
        self._random = random.Random(seed)
        self._log = log
        self._seen = len(log.since(0))  # sends from before this publisher are not its business
        self._due: list[tuple[float, dict[str, Any]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = PublisherStats()

    def pump(self, now: float | None = None) -> int:
        """Publish every event due by ``now`` (monotonic seconds; ``inf`` publishes all); returns how many."""
        with self._lock:
            self._schedule_new_sends()
            now = time.monotonic() if now is None else now
            ready = [event for due, event in self._due if due <= now]
            self._due = [(due, event) for due, event in self._due if due > now]
        if self.faults.reorder:
            self._random.shuffle(ready)
        for start in range(0, len(ready), 10):
            self._deliver(ready[start : start + 10])
        self.stats.events_published += len(ready)
        return len(ready)

    def pending(self) -> int:
        with self._lock:
            return len(self._due)

    def start(self, interval_s: float = 0.1) -> SesEventPublisher:
        def loop() -> None:
            while not self._stop.wait(interval_s):
                self.pump()

        self._thread = threading.Thread(target=loop, name="ses-event-publisher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _schedule_new_sends(self) -> None:
        sends = self._log.since(self._seen)
        self._seen += len(sends)
        now = time.monotonic()
        for send in sends:
            if send.configuration_set is None or (self._sets is not None
                                                  and send.configuration_set not in self._sets):
                continue
            for record in ses_event_records(send, self._account, self._region):
                if self._dropped(record, send.ses_message_id):
                    continue
                outcome = record["eventType"] != SES_SEND.name
                delay = self.faults.delay_s + (self.faults.outcome_delay_s if outcome else 0)
                copies = 2 if self._random.random() < self.faults.duplicate else 1
                for _ in range(copies):
                    self._due.append((now + delay * (0.9 + 0.2 * self._random.random()),
                                      eventbridge_event(record, self._account, self._region)))

    def _dropped(self, record: dict[str, Any], message_id: str) -> bool:
        if record["eventType"] == SES_SEND.name and self._random.random() < self.faults.drop_send:
            self.stats.send_events_dropped.append(message_id)
            return True
        return self._random.random() < self.faults.drop


def put_on_default_bus(events_client: Any) -> Deliver:
    """Deliver through the emulator's EventBridge, whose deployed rules route the events to their targets."""

    def deliver(batch: Sequence[dict[str, Any]]) -> None:
        entries = [{"Source": e["source"], "DetailType": e["detail-type"], "Detail": json.dumps(e["detail"]),
                    "Resources": e["resources"], "EventBusName": "default"} for e in batch]
        events_client.put_events(Entries=entries)

    return deliver


def as_sqs_records(events: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events as the recorder's SQS event source hands them over (for tests that skip EventBridge)."""
    return [{"messageId": str(uuid.uuid4()), "receiptHandle": base64.b64encode(uuid.uuid4().bytes).decode(),
             "body": json.dumps(event), "attributes": {"ApproximateReceiveCount": "1"},
             "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:evidence"} for event in events]
