"""Writes what SES said about an email onto its key's ledger record: one conditional UpdateItem per event.

Each write is idempotent (a duplicated event changes nothing) and order-free (a Delivery seen before its Send
confirms the send just as well): every attribute is set only if absent, and SES's message ids go into a string
set. It never creates a record nor revives an expired one. Any event proves SES accepted that message id, so
the record becomes SENT; a second distinct id on one key (among the reported ids and the one the consumer recorded
from SES's answer) means a second email went out, and is reported.

An event counts only for the key's current lifetime: a record claimed after the key was forgotten (past
``dedupe_ttl``) is a new lifetime, and an email SES accepted before its claim is the earlier lifetime's, so its
late bounce or complaint leaves the record alone (as it leaves a cancel's tombstone or an expired job's record, under
which nothing is sent).
A record written before lifetimes were recorded takes every event, as it did.

Attributes written (names from :class:`sendonce_contract.schema.Ledger`): the status (SENT), the SES message id
(if none), the set of every id SES reported, when SES accepted it (mail.timestamp), when the first event was
recorded, one time per event type and what the event says (bounce type, complaint feedback type, ...).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from sendonce_contract.record import every_ses_message_id, second_email
from sendonce_contract.schema import SES_EVENTS_BY_NAME, Ledger, Status

from .clock import Clock
from .dynamodb_values import condition_failed, found_item
from .ses_events import SesEvent

# SES stamps an email's acceptance (mail.timestamp) with its clock, the consumer a lifetime's start with the
# Lambda's: an email sent under a claim is accepted after it, but two clocks may disagree a little, so an event
# counts for a lifetime that began up to this much after SES's stamp. It stays far below the shortest dedupe_ttl
# the construct allows (SQS's shortest retention, 60 s), the least time between an earlier lifetime's completed
# email and a new claim of its key.
CLOCK_SKEW_MARGIN_MS = 5_000


class Verdict(enum.Enum):
    RECORDED = "recorded"
    UNKNOWN_KEY = "unknown_key"  # no record: never claimed here, or deleted by TTL
    EXPIRED_KEY = "expired_key"  # a record past its expiresAt counts as absent
    # An email of the key's earlier lifetime (accepted before its record's claim), or of a key since cancelled or
    # recorded EXPIRED.
    EARLIER_LIFETIME = "earlier_lifetime"


class Recorded(NamedTuple):
    verdict: Verdict
    first_evidence: bool = False  # this event is the first SES evidence for the key
    double_send: bool = False  # SES reported a second distinct message id for the key
    ses_message_ids: tuple[str, ...] = ()
    was_status: str | None = None


class EvidenceLedger:
    def __init__(self, client: Any, table_name: str, clock: Clock) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def record(self, event: SesEvent) -> Recorded:
        now_ms = self._clock.now_ms()
        values: dict[str, Any] = {
            ":sent": {"S": Status.SENT.value},
            ":id": {"S": event.ses_message_id},
            ":ids": {"SS": [event.ses_message_id]},
            ":accepted": {"N": str(event.sent_at_ms)},
            ":now_ms": {"N": str(now_ms)},
            ":now_s": {"N": str(now_ms // 1000)},
            ":cancelled": {"S": Status.CANCELLED.value},
            ":expired": {"S": Status.EXPIRED.value},
            ":accepted_late": {"N": str(event.sent_at_ms + CLOCK_SKEW_MARGIN_MS)},
        }
        names = {"#status": Ledger.STATUS, "#lifetime": Ledger.LIFETIME_STARTED_AT}
        sets = [
            "#status = :sent",
            f"{Ledger.SES_MESSAGE_ID} = if_not_exists({Ledger.SES_MESSAGE_ID}, :id)",
            f"{Ledger.SES_ACCEPTED_AT} = if_not_exists({Ledger.SES_ACCEPTED_AT}, :accepted)",
            f"{Ledger.EVIDENCE_AT} = if_not_exists({Ledger.EVIDENCE_AT}, :now_ms)",
        ]
        time_attribute = SES_EVENTS_BY_NAME[event.event_type].time_attribute
        if time_attribute != Ledger.SES_ACCEPTED_AT:
            values[":occurred"] = {"N": str(event.occurred_at_ms)}
            sets.append(f"{time_attribute} = if_not_exists({time_attribute}, :occurred)")
        for n, (name, value) in enumerate(sorted(event.outcome.items())):
            names[f"#o{n}"] = name
            values[f":o{n}"] = {"S": value or "-"}
            sets.append(f"#o{n} = if_not_exists(#o{n}, :o{n})")
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={Ledger.KEY: {"S": event.dedupe_key}},
                UpdateExpression=(f"SET {', '.join(sets)} ADD {Ledger.SES_MESSAGE_IDS} :ids "
                                  f"REMOVE {Ledger.LEASE_EXPIRES_AT}"),
                ConditionExpression=(f"attribute_exists({Ledger.KEY}) AND {Ledger.EXPIRES_AT} >= :now_s "
                                     "AND NOT (#status IN (:cancelled, :expired)) "
                                     "AND (attribute_not_exists(#lifetime) OR #lifetime <= :accepted_late)"),
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if not condition_failed(error):
                raise
            return Recorded(_refused(found_item(error), now_ms))
        old = response.get("Attributes", {})
        reported = set(old.get(Ledger.SES_MESSAGE_IDS, {}).get("SS", []))
        # After a resend, the first email's late event meets the resend's recorded id here even if the resend's own
        # events are lost.
        known = every_ses_message_id(old)
        return Recorded(
            Verdict.RECORDED,
            first_evidence=not reported,
            double_send=second_email(known, event.ses_message_id),
            ses_message_ids=tuple(sorted(known | {event.ses_message_id})),
            was_status=old.get(Ledger.STATUS, {}).get("S"),
        )


def _refused(item: Any, now_ms: int) -> Verdict:
    """Why the condition refused the event, from the item as it stood (None: there was none)."""
    if not item:
        return Verdict.UNKNOWN_KEY
    expires_at_s = item.get(Ledger.EXPIRES_AT, {}).get("N")
    if expires_at_s is not None and int(expires_at_s) < now_ms // 1000:
        return Verdict.EXPIRED_KEY
    return Verdict.EARLIER_LIFETIME
