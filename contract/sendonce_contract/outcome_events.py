"""The events an application hears about each key: one per transition of its ledger record.

A transition is read from one write's before and after images (the ledger table's stream): the conditional write
that made it is what decides it happened, so a duplicated or reordered SES event, which changes nothing, publishes
nothing. Each event's ``eventId`` is derived from the key, the transition and what distinguishes it (the SES
message id for a second email), so a retried publish carries the same id: dedupe on it.

Pure functions over DynamoDB's attribute-value images: the bundled publisher and the local demo both use them.
"""

# No `from __future__ import annotations`: NamedTuple field types stay objects, which the API reference resolves.
import hashlib
import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from .record import every_ses_message_id
from .schema import DEDUPE_KEY, SES_EVENT_TYPES, GuardItem, Ledger, SesStopItem, Status

SOURCE = "sendonce"
Image = Mapping[str, Any]


class OutcomeType(NamedTuple):
    transition: str  # the detail's "transition"
    detail_type: str  # EventBridge's detail-type


SENT = OutcomeType("sent", "Email Sent")
UNKNOWN = OutcomeType("unknown", "Email Unknown")
CANCELLED = OutcomeType("cancelled", "Email Cancelled")
EXPIRED = OutcomeType("expired", "Email Expired")
# Not a ledger transition: the consumer publishes it when it moves a keyed job to the DLQ.
DEAD_LETTERED = OutcomeType("dead-lettered", "Email Dead-Lettered")
SENT_TWICE = OutcomeType("sent-twice", "Email Sent Twice")
# Not an email's: a lane's SES stop (a paused account or tenant, the pipeline's setup refused, the daily quota),
# from its stop item's writes (SesStopItem), and its end when SES accepted a send again.
SENDING_STOPPED = OutcomeType("sending-stopped", "Email Sending Stopped")
SENDING_RESUMED = OutcomeType("sending-resumed", "Email Sending Resumed")
# From the mis-keyed-producer guard's content item (GuardItem): a key that sent what its recipients got under
# another key in the window, once per key.
SUSPECTED_DOUBLE = OutcomeType("suspected-double", "Email Suspected Double")
# One per SES outcome the recorder writes, named as SES's own EventBridge detail-types are, from the one table.
SES_OUTCOMES = {event.name: OutcomeType(event.label.replace(" ", "-"), event.detail_type)
                for event in SES_EVENT_TYPES if event.label is not None}
OUTCOME_TYPES = (SENT, *SES_OUTCOMES.values(), UNKNOWN, SENT_TWICE, CANCELLED, EXPIRED, DEAD_LETTERED,
                 SENDING_STOPPED, SENDING_RESUMED, SUSPECTED_DOUBLE)
BY_TRANSITION = {outcome.transition: outcome for outcome in OUTCOME_TYPES}


class OutcomeEvent(NamedTuple):
    outcome: OutcomeType
    detail: dict[str, Any]

    def entry(self, bus: str) -> dict[str, Any]:
        """A PutEvents entry."""
        return {"Source": SOURCE, "DetailType": self.outcome.detail_type, "EventBusName": bus,
                "Detail": json.dumps(self.detail, separators=(",", ":"), sort_keys=True)}


def _text(image: Image, name: str) -> str | None:
    value = image.get(name, {}).get("S")
    return None if value is None else str(value)


def _number(image: Image, name: str) -> int | None:
    value = image.get(name, {}).get("N")
    return None if value is None else int(value)


def event_id(key: str, transition: str, discriminator: str = "") -> str:
    return hashlib.sha256(f"{key}\x00{transition}\x00{discriminator}".encode()).hexdigest()


def dead_lettered(key: str, pipeline: str, reason_code: str, reason: str | None, source_message_id: str,
                  at_ms: int, tenant: str | None = None) -> OutcomeEvent:
    """The event for a keyed job the consumer moved to the dead-letter queue; one per message moved."""
    detail = {
        DEDUPE_KEY: key, "pipeline": pipeline, "transition": DEAD_LETTERED.transition, "at": at_ms,
        "reasonCode": reason_code, "reason": reason, "sourceMessageId": source_message_id,
        "eventId": event_id(key, DEAD_LETTERED.transition, source_message_id), Ledger.TENANT: tenant}
    return OutcomeEvent(DEAD_LETTERED, detail)


def transitions(old: Image | None, new: Image | None, pipeline: str) -> list[OutcomeEvent]:
    """The outcome events one write made: ``old`` and ``new`` are the item before and after (None when absent).

    A removed item (TTL, a released claim) is no outcome. Never raises for an image it does not understand: an
    attribute it does not know is ignored, as a newer writer's would be.
    """
    if not new or Ledger.KEY not in new:
        return []
    old = old or {}
    if SesStopItem.KIND in new:
        return _stop_transitions(old, new, pipeline)
    if GuardItem.KIND in new:
        return _suspected_doubles(old, new, pipeline)
    key = str(new[Ledger.KEY]["S"])
    status, was = _text(new, Ledger.STATUS), _text(old, Ledger.STATUS)
    ids = every_ses_message_id(new)
    # Every email's event names its tenant, as the consumer's claim recorded it: null for a job that named none
    # (and for a cancel, written before any claim), so a subscriber reads one shape whatever the job.
    base: dict[str, Any] = {DEDUPE_KEY: key, "pipeline": pipeline, "status": status,
                            Ledger.SES_MESSAGE_IDS: sorted(ids), Ledger.TENANT: _text(new, Ledger.TENANT)}
    found: list[OutcomeEvent] = []

    def add(outcome: OutcomeType, at_ms: int | None, discriminator: str = "",
            fields: Mapping[str, str | None] | None = None) -> None:
        found.append(OutcomeEvent(outcome, {**base, "transition": outcome.transition, "at": at_ms,
                                            "eventId": event_id(key, outcome.transition, discriminator),
                                            **(fields or {})}))

    if status != was:
        if status == Status.SENT.value:
            add(SENT, _number(new, Ledger.SENT_AT) or _number(new, Ledger.SES_ACCEPTED_AT)
                or _number(new, Ledger.EVIDENCE_AT))
        elif status == Status.UNKNOWN.value:
            add(UNKNOWN, _number(new, Ledger.UNKNOWN_AT))
        elif status == Status.CANCELLED.value:
            add(CANCELLED, _number(new, Ledger.CANCELLED_AT))
        elif status == Status.EXPIRED.value:
            add(EXPIRED, _number(new, Ledger.FOUND_EXPIRED_AT))
    for event in SES_EVENT_TYPES:
        if event.label is None or event.time_attribute not in new or event.time_attribute in old:
            continue
        fields = {name: _text(new, name) for name in event.outcome_attributes}
        add(SES_OUTCOMES[event.name], _number(new, event.time_attribute), fields=fields)
    new_ids = ids - every_ses_message_id(old)
    if len(ids) >= 2 and new_ids:
        add(SENT_TWICE, _number(new, Ledger.EVIDENCE_AT), ",".join(sorted(ids)))
    return found


def _stop_transitions(old: Image, new: Image, pipeline: str) -> list[OutcomeEvent]:
    """A lane's stop learned (a new ``stoppedAt``) or over (``resumedAt`` set): one event each, whose id is the
    stop's, so a retried publish carries the same."""
    stopped_at = _number(new, SesStopItem.STOPPED_AT)
    detail = {"pipeline": pipeline, "lane": _text(new, SesStopItem.LANE) or None,
              "scope": _text(new, SesStopItem.SCOPE), "kind": _text(new, SesStopItem.KIND),
              "reason": _text(new, SesStopItem.REASON), "stoppedAt": stopped_at}
    key = str(new[Ledger.KEY]["S"])
    found = []
    if stopped_at is not None and stopped_at != _number(old, SesStopItem.STOPPED_AT):
        found.append(OutcomeEvent(SENDING_STOPPED, {
            **detail, "transition": SENDING_STOPPED.transition, "at": stopped_at,
            "eventId": event_id(key, SENDING_STOPPED.transition, str(stopped_at))}))
    resumed_at = _number(new, SesStopItem.RESUMED_AT)
    if resumed_at is not None and _number(old, SesStopItem.RESUMED_AT) is None:
        found.append(OutcomeEvent(SENDING_RESUMED, {
            **detail, "transition": SENDING_RESUMED.transition, "at": resumed_at,
            "eventId": event_id(key, SENDING_RESUMED.transition, str(stopped_at))}))
    return found


def _suspected_doubles(old: Image, new: Image, pipeline: str) -> list[OutcomeEvent]:
    """Each key newly among a content item's suspects: one event each, whose id is the key's, so a retried publish
    (or the same key seen again) carries the same. A rewritten item (a new window) starts with no suspects."""
    suspects = set(new.get(GuardItem.SUSPECTS, {}).get("SS", ()))
    if _text(old, GuardItem.FIRST_KEY) == _text(new, GuardItem.FIRST_KEY):
        suspects -= set(old.get(GuardItem.SUSPECTS, {}).get("SS", ()))
    first_key = _text(new, GuardItem.FIRST_KEY)
    return [OutcomeEvent(SUSPECTED_DOUBLE, {
        DEDUPE_KEY: key, "pipeline": pipeline, "transition": SUSPECTED_DOUBLE.transition,
        "at": _number(new, GuardItem.LAST_SUSPECT_AT), "firstKey": first_key,
        Ledger.TENANT: _text(new, GuardItem.TENANT),
        "eventId": event_id(key, SUSPECTED_DOUBLE.transition, first_key or "")}) for key in sorted(suspects)]
