"""The pace table: where a paced lane's instances take the seats that spread their send slots through each second.

Each instance of such a lane that becomes busy takes the next seat from its lane's counter (one item per lane,
``UpdateItem ... ADD``, ``sendonce_runtime.pace_seats``): seats give the instances evenly spread phases, where
random ones left a quiet tenant's job waiting for the widest gap between them. A lane that is not paced has no
slots to spread, and one that runs a single instance has no other instance to spread them from.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from sendonce_contract.deploy_config import takes_seats_at
from sendonce_contract.schema import PaceSeat
from sendonce_contract.stack_names import ChildId

from .acknowledgements import acknowledge
from .parts import Lane
from .readings import read
from .unresolved import is_known

# A seat is one atomic counter increment, and nothing else: no read, no other item.
PACE_TABLE_ACTIONS = ("dynamodb:UpdateItem",)


def takes_seats(lane: Lane, reserved_concurrent_executions: int | None) -> bool:
    """Whether ``lane``'s consumer takes seats: it is paced, at most one email a second an instance at its fastest
    (its own share and any loan: ``takes_seats_at``), and may run more than one instance. Without a cap Lambda
    scales out, and a cap that is a token may be above one: both take seats."""
    if lane.max_send_rate is None:
        return False
    own, lent = read(lane.max_send_rate), read(lane.lent_send_rate) if lane.lent_send_rate is not None else 0.0
    if is_known(own) and is_known(lent) and not takes_seats_at(own + lent):
        return False
    caps = (read(cap) for cap in (lane.max_concurrency, reserved_concurrent_executions))
    return not any(is_known(cap) and cap <= 1 for cap in caps)


def build_pace_table(scope: Construct, encryption_key: kms.IKey | None,
                     removal_policy: RemovalPolicy) -> dynamodb.Table:
    """The pipeline's one pace table (a counter item per lane that takes seats), encrypted like the dedupe table."""
    table = dynamodb.Table(
        scope,
        ChildId.PACE_TABLE,
        partition_key=dynamodb.Attribute(name=PaceSeat.LANE, type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        # Nothing here is worth restoring: a counter lost or reset only gives out seats from the first again.
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=False
        ),
        removal_policy=removal_policy,
        encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if encryption_key else None,
        encryption_key=encryption_key,
    )
    acknowledge(table, "AwsSolutions-DDB3",
                "The pace table holds one seat counter per lane, which spreads the instances' send slots: a counter "
                "lost or reset gives out seats from the first again, so there is no data to recover.")
    return table
