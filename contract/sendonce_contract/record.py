"""A key's ledger record as its readers see it: the consumer (the record that stood in the way of its claim), the
operator command, the producer's ``status``, its ``cancel`` and the local report decode an item with this one
codec, so none can read an attribute differently.

The consumer and the recorder write the item (attribute names in :mod:`sendonce_contract.schema`); this module
only reads it, and tolerates attributes it does not know. A named tuple, not a dataclass: the consumer's cold
start defines it.
"""

# No `from __future__ import annotations`: NamedTuple field types stay objects, which the API reference resolves.
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from .schema import SES_EVENT_TYPES, Ledger, Status


def every_ses_message_id(item: Mapping[str, Any]) -> frozenset[str]:
    """The ids SES's events reported for a key (``item`` is its ledger item) and the one the consumer recorded from
    SES's answer, as one set: after a resend, either email's id meets the other's here even if the other's own
    events were lost."""
    recorded = item.get(Ledger.SES_MESSAGE_ID, {}).get("S")
    return frozenset(item.get(Ledger.SES_MESSAGE_IDS, {}).get("SS", ())) | ({recorded} if recorded else set())


def second_email(known: Collection[str], ses_message_id: str) -> bool:
    """Whether ``ses_message_id``, joining the ids a key's record ``known`` holds, is a second email for the key
    (the double the recorder and the consumer report, whichever of them meets it first)."""
    return bool(known) and ses_message_id not in known


class SesOutcome(NamedTuple):
    """What SES's events said became of an email: ``what`` is the event type's label ("delivered", "bounced", ...),
    ``at_ms`` when it happened, ``detail`` what it says ("Permanent/General" for a bounce)."""

    what: str
    at_ms: int | None
    detail: str


class EmailRecord(NamedTuple):
    key: str
    status: str
    owner: str
    attempts: int
    ses_message_id: str | None
    claimed_at_ms: int | None
    sent_at_ms: int | None
    unknown_at_ms: int | None
    lease_expires_at_ms: int | None
    expires_at_s: int | None
    # What SES's events said (written by the recorder): every message id SES reported, and what became of them.
    ses_message_ids: tuple[str, ...] = ()
    ses_accepted_at_ms: int | None = None
    evidence_at_ms: int | None = None
    outcomes: tuple[SesOutcome, ...] = ()  # in the order they happened
    payload_hash: str = ""  # of the job that claimed the key: another payload under the key is a conflict
    refused_sends: int = 0  # takeovers whose send SES refused for certain: attempts that sent nothing

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> "EmailRecord":
        def number(name: str) -> int | None:
            return int(item[name]["N"]) if name in item else None

        def text(name: str) -> str:
            return str(item.get(name, {}).get("S", ""))

        outcomes = sorted(
            (SesOutcome(event.label, number(event.time_attribute),
                        "/".join(text(name) for name in event.outcome_attributes))
             for event in SES_EVENT_TYPES if event.label is not None and event.time_attribute in item),
            key=lambda outcome: outcome.at_ms or 0,
        )
        return cls(
            key=item[Ledger.KEY]["S"], status=item[Ledger.STATUS]["S"], owner=text(Ledger.OWNER),
            attempts=number(Ledger.ATTEMPTS) or 0, ses_message_id=item.get(Ledger.SES_MESSAGE_ID, {}).get("S"),
            claimed_at_ms=number(Ledger.CLAIMED_AT), sent_at_ms=number(Ledger.SENT_AT),
            unknown_at_ms=number(Ledger.UNKNOWN_AT), lease_expires_at_ms=number(Ledger.LEASE_EXPIRES_AT),
            expires_at_s=number(Ledger.EXPIRES_AT),
            ses_message_ids=tuple(sorted(item.get(Ledger.SES_MESSAGE_IDS, {}).get("SS", []))),
            ses_accepted_at_ms=number(Ledger.SES_ACCEPTED_AT), evidence_at_ms=number(Ledger.EVIDENCE_AT),
            outcomes=tuple(outcomes), payload_hash=text(Ledger.PAYLOAD_HASH),
            refused_sends=number(Ledger.REFUSED_SENDS) or 0,
        )

    @property
    def state(self) -> Status:
        return Status(self.status)

    def outcome(self, what: str) -> SesOutcome | None:
        """The first outcome SES reported of this kind ("delivered", "bounced", "complained", ...), if any."""
        return next((outcome for outcome in self.outcomes if outcome.what == what), None)

    @property
    def double_send(self) -> bool:
        """Two emails went out for this key: SES reported two message ids, or reported one other than the id the
        consumer recorded from SES's answer (the residual when events for one of them were lost)."""
        return len(self.every_ses_message_id) >= 2

    @property
    def every_ses_message_id(self) -> tuple[str, ...]:
        """The ids SES's events reported and the one the consumer recorded from SES's answer, as one set."""
        recorded = {self.ses_message_id} if self.ses_message_id else set()
        return tuple(sorted(set(self.ses_message_ids) | recorded))

    def expired(self, now_ms: int) -> bool:
        # In whole seconds, as the claim's and the cancel's conditions compare it (expiresAt < now_s): in the
        # record's last second a read and a claim agree that it still stands.
        return self.expires_at_s is not None and self.expires_at_s < now_ms // 1000

    def needs_a_decision(self, now_ms: int) -> bool:
        """UNKNOWN, or IN_FLIGHT with a lease its worker cannot still hold."""
        lease_over = self.lease_expires_at_ms is not None and self.lease_expires_at_ms < now_ms
        undecided = self.status == Status.UNKNOWN.value or (self.status == Status.IN_FLIGHT.value and lease_over)
        return not self.expired(now_ms) and undecided

    @property
    def last_change_ms(self) -> int:
        return max(v or 0 for v in (self.claimed_at_ms, self.sent_at_ms, self.unknown_at_ms))

    def as_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "every_ses_message_id": list(self.every_ses_message_id),
                "double_send": self.double_send}
