"""A function with its own role should wait for the role's policy, without a DependsOn on the role itself."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_


def depend_on_role_policy_only(function: lambda_.Function, role: iam.Role) -> None:
    """Lambda makes its function depend on the whole role at construct level, where no API removes one part.
    The function names the role by GetAtt already, so cfn-lint flags that DependsOn as redundant (W3005); keep
    only the one on the policy, which nothing else orders. Call it after the last grant."""
    policy = role.node.find_child("DefaultPolicy").node.default_child
    function_resource = function.node.default_child
    assert isinstance(policy, iam.CfnPolicy) and isinstance(function_resource, lambda_.CfnFunction)
    function_resource.add_override("DependsOn", [Stack.of(function).get_logical_id(policy)])
