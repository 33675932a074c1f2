"""Writes what SES said about an email onto its key's ledger record: one conditional UpdateItem per event.

Each write is idempotent (a duplicated event changes nothing) and order-free (a Delivery seen before its Send
confirms the send just as well): every attribute is set only if absent, and SES's message ids go into a string
set. It never creates a record nor revives an expired one. Any event proves SES accepted that message id, so
the record becomes SENT; a second distinct id on one key (among the reported ids and the one the consumer recorded
from SES's answer) means a second email went out, and is reported.

Attributes written (names from :class:`sendonce_contract.schema.Ledger`): the status (SENT), the SES message id
(if none), the set of every id SES reported, when SES accepted it (mail.timestamp), when the first event was
recorded, one time per event type and what the event says (bounce type, complaint feedback type, ...).
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from sendonce_contract.schema import SES_EVENTS_BY_NAME, Ledger, Status

from .clock import Clock
from .ses_events import SesEvent


class Verdict(enum.Enum):
    RECORDED = "recorded"
    UNKNOWN_KEY = "unknown_key"  # no record: never claimed here, or deleted by TTL
    EXPIRED_KEY = "expired_key"  # a record past its expiresAt counts as absent


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
        }
        names = {"#status": Ledger.STATUS}
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
                ConditionExpression=f"attribute_exists({Ledger.KEY}) AND {Ledger.EXPIRES_AT} >= :now_s",
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            old_item = error.response.get("Item")
            return Recorded(Verdict.EXPIRED_KEY if old_item else Verdict.UNKNOWN_KEY)
        old = response.get("Attributes", {})
        reported = set(old.get(Ledger.SES_MESSAGE_IDS, {}).get("SS", []))
        # The id the consumer recorded from SES's answer and the ids SES's events reported are one set: after a
        # resend, the first email's late event meets the resend's id here even if the resend's own events are lost.
        known = reported | {old[Ledger.SES_MESSAGE_ID]["S"]} if Ledger.SES_MESSAGE_ID in old else reported
        return Recorded(
            Verdict.RECORDED,
            first_evidence=not reported,
            double_send=bool(known) and event.ses_message_id not in known,
            ses_message_ids=tuple(sorted(known | {event.ses_message_id})),
            was_status=old.get(Ledger.STATUS, {}).get("S"),
        )
