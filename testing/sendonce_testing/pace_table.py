"""The pace table made by API, as the construct makes it (``sendonce_constructs.pace_table``), for tests and the
benchmark that run a consumer against the emulator without deploying a stack."""

from __future__ import annotations

from typing import Any

from sendonce_contract.deploy_config import takes_seats_at
from sendonce_contract.schema import PaceSeat


def create_pace_table(dynamodb: Any, name: str) -> str:
    """An on-demand table keyed by the lane, as the construct's."""
    dynamodb.create_table(TableName=name, KeySchema=[{"AttributeName": PaceSeat.LANE, "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": PaceSeat.LANE, "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")
    return name


def pace_table_where_the_construct_makes_one(dynamodb: Any, name: str, rate_per_instance: float,
                                            instances: int) -> str | None:
    """The table, made when the construct would make one for a lane of ``instances`` instances each paced at
    ``rate_per_instance`` (more than one instance, each at most one email a second: ``takes_seats``); else None."""
    if instances > 1 and takes_seats_at(rate_per_instance):
        return create_pace_table(dynamodb, name)
    return None
