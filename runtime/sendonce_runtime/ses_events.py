"""SES's sending events, as EventBridge delivers them to the evidence queue: parsed, or refused with a reason.

The SQS body is the EventBridge event: ``source`` ``aws.ses``, a ``detail-type`` such as "Email Sent", and the
SES event record as ``detail``: ``eventType``, the ``mail`` object (``messageId``, ``timestamp``, ``tags``) and
one object named for the event type. Shapes follow the SES Developer Guide's "Contents of event data".
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, NamedTuple

from sendonce_contract.key_tags import key_from_tags, pipeline_of
from sendonce_contract.schema import IGNORED_SES_EVENT_TYPES, SES_EVENTS_BY_NAME

# Bounded: a rendering error quotes the template, and an item must stay far below DynamoDB's 400 KB.
OUTCOME_VALUE_MAX = 512


class MalformedEvent(ValueError):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IgnoredEvent(Exception):
    """An event that says nothing about whether the email went out (an open, a click)."""


class SesEvent(NamedTuple):
    event_type: str
    ses_message_id: str
    dedupe_key: str
    pipeline: str | None
    sent_at_ms: int  # mail.timestamp: when SES accepted the email
    occurred_at_ms: int  # the event's own time, or the send time when it has none
    outcome: dict[str, str]  # what the event says of delivery, as ledger attributes (strings)


def parse_event(body: str) -> SesEvent:
    try:
        envelope = json.loads(body)
    except (ValueError, RecursionError):
        raise MalformedEvent("body is not JSON") from None
    if not isinstance(envelope, dict) or envelope.get("source") != "aws.ses":
        raise MalformedEvent("not an EventBridge event from aws.ses")
    detail = envelope.get("detail")
    if not isinstance(detail, dict):
        raise MalformedEvent("the event has no detail object")
    event_type = detail.get("eventType")
    if event_type in IGNORED_SES_EVENT_TYPES:
        raise IgnoredEvent(str(event_type))
    if event_type not in SES_EVENTS_BY_NAME:
        raise MalformedEvent(f"unknown eventType {event_type!r}")
    mail = detail.get("mail")
    if not isinstance(mail, dict):
        raise MalformedEvent(f"{event_type} event has no mail object")
    message_id, tags = mail.get("messageId"), mail.get("tags")
    if not isinstance(message_id, str) or not message_id:
        raise MalformedEvent(f"{event_type} event has no mail.messageId")
    if not isinstance(tags, dict):
        raise MalformedEvent(f"{event_type} event for {message_id} has no mail.tags")
    key = key_from_tags(tags)
    if key is None:
        raise MalformedEvent(f"{event_type} event for {message_id} carries no readable sendonce key tags")
    sent_at = _ms(mail.get("timestamp"), f"{event_type} event for {message_id}: mail.timestamp")
    object_name = SES_EVENTS_BY_NAME[event_type].record_object
    own = detail.get(object_name)
    if not isinstance(own, dict):
        raise MalformedEvent(f"{event_type} event for {message_id} has no {object_name} object")
    occurred = _ms(own["timestamp"], f"{event_type}.timestamp") if "timestamp" in own else sent_at
    return SesEvent(event_type, message_id, key, pipeline_of(tags), sent_at, occurred, _outcome(event_type, own))


def _outcome(event_type: str, own: dict[str, Any]) -> dict[str, str]:
    return {attribute: str(own.get(field, ""))[:OUTCOME_VALUE_MAX]
            for attribute, field in SES_EVENTS_BY_NAME[event_type].outcome_fields}


def _ms(value: object, what: str) -> int:
    if not isinstance(value, str):
        raise MalformedEvent(f"{what} is missing")
    try:
        return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise MalformedEvent(f"{what} {value!r} is not an ISO 8601 time") from None
