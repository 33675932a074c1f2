"""Seats: where a paced lane's instances put their send slots within each second, so they send evenly spread.

Each instance paces at its share of the lane's rate, one slot every 1 / share seconds. At random phases, the
slots of five instances at one a second leave gaps of up to about 0.45 s at p95 between them, and a job arriving
in one (a quiet tenant's, which a fair queue hands out next) waits for the next instance's slot that long. So an
instance that becomes busy takes a seat: the next number of its lane's counter in the pace table (one
``UpdateItem``, ``ADD``, per instance each time it becomes busy after idling). Seat n's phase is n times the
golden ratio's fraction, modulo 1: any run of consecutive seats, the ones a flood's instances take as they wake,
lies spread through the period with no gap wider than about twice an even spread's (1.2 times it for five;
the three-gap theorem), whatever their number and wherever the counter stands, with no seat count to agree on
nor seat to give back.

Without an answer in time (the table slow or failing) an instance keeps the random phase it had: a fault may
bunch sends, never lose one.
"""

from __future__ import annotations

import math
from typing import Any

from sendonce_contract.schema import PaceSeat

GOLDEN_FRACTION = (math.sqrt(5) - 1) / 2


def seat_phase(seat: int) -> float:
    """Seat ``seat``'s phase, as a share of its grid's period in [0, 1)."""
    return math.fmod(seat * GOLDEN_FRACTION, 1.0)


class PaceSeats:
    """The lane's seat counter in the pace table, read with the ledger's client (one try, the ledger call's
    timeouts)."""

    def __init__(self, dynamodb: Any, table_name: str, lane: str, call_ms: int) -> None:
        self._dynamodb, self._table_name, self._lane = dynamodb, table_name, lane
        self.call_ms = call_ms  # how long a take may last: the client's connect and read timeouts

    def take(self) -> float | None:
        """The phase of the next seat of the lane, or None if the table did not answer."""
        try:
            answer = self._dynamodb.update_item(
                TableName=self._table_name,
                Key={PaceSeat.LANE: {"S": self._lane}},
                UpdateExpression="ADD #taken :one",
                ExpressionAttributeNames={"#taken": PaceSeat.TAKEN},
                ExpressionAttributeValues={":one": {"N": "1"}},
                ReturnValues="UPDATED_NEW",
            )
            return seat_phase(int(answer["Attributes"][PaceSeat.TAKEN]["N"]))
        except Exception:  # slow, throttled or failing: the instance keeps a random phase
            return None
