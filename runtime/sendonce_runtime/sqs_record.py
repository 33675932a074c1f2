"""One record of an SQS event, as the consumer needs it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sendonce_contract.schema import GUARD_HOLDS, UNSENT_CLAIMS_CARRIED, CopyAttribute, DeadLetter


class SqsRecord(NamedTuple):
    message_id: str
    body: str
    receive_count: int
    message_group_id: str | None
    event_source_arn: str
    receipt_handle: str = ""
    message_attributes: tuple[tuple[str, str, str], ...] = ()  # (name, data type, string value)
    sent_at_ms: int | None = None  # when SQS took this message (its SentTimestamp; a copy's is the copy's)

    @property
    def postponements(self) -> int:
        value = next((v for name, _, v in self.message_attributes if name == CopyAttribute.POSTPONEMENTS), "0")
        return int(value) if value.isdigit() else 0

    def _attribute(self, name: str) -> str | None:
        return next((v for n, _, v in self.message_attributes if n == name), None)

    @property
    def unsent_claims(self) -> tuple[str, ...]:
        """Owner tokens of claims an earlier delivery of this job wrote (or may have) and surely never sent under."""
        return tuple((self._attribute(CopyAttribute.UNSENT_CLAIM) or "").split())

    @property
    def unrecorded_send(self) -> tuple[str, str] | None:
        """(owner, SES message id) of a send SES accepted that an earlier delivery could not record."""
        parts = (self._attribute(CopyAttribute.UNRECORDED_SEND) or "").split()
        return (parts[0], parts[1]) if len(parts) == 2 else None

    @property
    def parked_since(self) -> int | None:
        """When this job was first parked while SES stopped sending (epoch ms), carried by its copies."""
        value = self._attribute(CopyAttribute.PARKED_SINCE) or ""
        return int(value) if value.isdigit() else None

    @property
    def unparked_at(self) -> int | None:
        """When the schedule watch sent this job back from a stop, SES having said it sends again (epoch ms)."""
        value = self._attribute(CopyAttribute.UNPARKED_AT) or ""
        return int(value) if value.isdigit() else None

    @property
    def first_queued_at(self) -> int | None:
        """When the job's first message was queued (epoch ms): carried by its copies and dead letters, else this
        message's own SentTimestamp."""
        value = self._attribute(CopyAttribute.FIRST_QUEUED_AT) or ""
        return int(value) if value.isdigit() else self.sent_at_ms

    @property
    def released(self) -> str | None:
        """The guard's hold an operator's redrive released this job from: marked by ``sendonce dlq redrive``, or
        the DLQ's own reason code on a message SQS's move task brought back with its attributes. None otherwise."""
        for name in (CopyAttribute.RELEASED, DeadLetter.REASON_CODE):
            value = self._attribute(name)
            if value in GUARD_HOLDS:
                return value
        return None

    @property
    def supersedes(self) -> str | None:
        """The receipt handle of the message this delayed copy replaces."""
        return self._attribute(CopyAttribute.SUPERSEDES)

    @classmethod
    def from_event(cls, record: dict[str, Any]) -> SqsRecord:
        attributes = record.get("attributes") or {}
        return cls(
            message_id=str(record["messageId"]),
            body=str(record.get("body", "")),
            receive_count=int(attributes.get("ApproximateReceiveCount", "1")),
            message_group_id=attributes.get("MessageGroupId"),
            event_source_arn=str(record.get("eventSourceARN", "")),
            receipt_handle=str(record.get("receiptHandle", "")),
            sent_at_ms=int(sent) if str(sent := attributes.get("SentTimestamp", "")).isdigit() else None,
            message_attributes=tuple(
                (name, str(value.get("dataType", "String")), str(value["stringValue"]))
                for name, value in (record.get("messageAttributes") or {}).items()
                if isinstance(value, dict) and value.get("stringValue") is not None
            ),
        )

    @classmethod
    def from_message(cls, message: dict[str, Any], event_source_arn: str) -> SqsRecord:
        """A message in ``ReceiveMessage``'s shape, as Lambda would have handed it."""
        attributes = message.get("Attributes") or {}
        return cls.from_event({
            "messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"],
            "body": message.get("Body", ""), "attributes": attributes, "eventSourceARN": event_source_arn,
            "messageAttributes": {name: {"dataType": value.get("DataType", "String"),
                                         "stringValue": value.get("StringValue")}
                                  for name, value in (message.get("MessageAttributes") or {}).items()},
        })


def carried_claims(tokens: Sequence[str]) -> str:
    """The unsent-claim tokens a copy carries on: each distinct, the newest ``UNSENT_CLAIMS_CARRIED`` of them (a
    token dropped names a claim a later delivery takes for a dead worker's: only ever late, never sent twice)."""
    distinct = list(dict.fromkeys(tokens))
    return " ".join(distinct[-UNSENT_CLAIMS_CARRIED:])
