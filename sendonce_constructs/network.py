"""Whether the functions placed in a VPC can reach AWS at all: a warning (acknowledgeable) when the selected subnets
have no route out and the VPC has no endpoint, since every call would then time out and nothing be sent.

It runs as an aspect, when the app is synthesized, so endpoints added after the construct still count.
"""

from __future__ import annotations

from typing import Any

import jsii
from aws_cdk import IAspect, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import IConstruct

from .synth_warnings import VPC_WITHOUT_EGRESS


def subnets_without_egress(vpc: ec2.IVpc, selection: ec2.SubnetSelection | None) -> list[str] | None:
    """The selected subnets' ids when none of them routes to the internet, else None. Only CDK's private subnets
    (PRIVATE_WITH_EGRESS) route out: isolated ones have no route, and in public ones a function has no address."""
    selected = vpc.select_subnets(**_selection_args(selection))
    if selected.is_pending_lookup:
        return None
    with_egress = {subnet.node.path for subnet in vpc.private_subnets}
    if any(subnet.node.path in with_egress for subnet in selected.subnets):
        return None
    return [subnet.node.id for subnet in selected.subnets]


def has_endpoint(vpc: ec2.IVpc) -> bool:
    """Whether any VPC endpoint in the app is in ``vpc``."""
    vpc_id = Stack.of(vpc).resolve(vpc.vpc_id)
    root = vpc.node.root
    return any(isinstance(node, ec2.CfnVPCEndpoint) and Stack.of(node).resolve(node.vpc_id) == vpc_id
               for node in root.node.find_all())


def _selection_args(selection: ec2.SubnetSelection | None) -> dict[str, Any]:
    if selection is None:
        return {}
    names = ("availability_zones", "one_per_az", "subnet_filters", "subnet_group_name", "subnets", "subnet_type")
    return {name: getattr(selection, name) for name in names if getattr(selection, name, None) is not None}


@jsii.implements(IAspect)
class VpcEgressCheck:
    def __init__(self, owner: IConstruct, vpc: ec2.IVpc, selection: ec2.SubnetSelection | None) -> None:
        self._owner = owner
        self._vpc = vpc
        self._selection = selection

    def visit(self, node: IConstruct) -> None:
        if node is not self._owner:
            return
        VPC_WITHOUT_EGRESS.give(self._owner, subnets_without_egress(self._vpc, self._selection),
                                has_endpoint(self._vpc))
