"""The pace table: a paced lane of more than one instance takes its seats there; nothing else gets one."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template
from construct_support import build, make_stack

from sendonce_contract.deploy_config import Env
from sendonce_contract.priority import Priority
from sendonce_contract.schema import PaceSeat

PACED = {"send_rate": 5, "max_concurrency": 5}  # one email a second an instance: a bucket of one token
CONSUMER_HANDLER = "sendonce_runtime.handler.handler"


def pace_tables(template: Template) -> dict[str, dict[str, Any]]:
    return {name: table for name, table in template.find_resources("AWS::DynamoDB::Table").items()
            if name.startswith("ReceiptsPaceTable")}


def pace_table_by_function(template: Template) -> dict[str, Any]:
    """Each function's SENDONCE_PACE_TABLE (None without it), by logical id."""
    return {name: function["Properties"].get("Environment", {}).get("Variables", {}).get(Env.PACE_TABLE)
            for name, function in template.find_resources("AWS::Lambda::Function").items()}


def statements_naming(template: Template, logical_id: str) -> dict[str, list[dict[str, Any]]]:
    """The policy statements whose resources name ``logical_id``, by policy."""
    return {name: [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if logical_id in str(s["Resource"])]
            for name, policy in template.find_resources("AWS::IAM::Policy").items()
            if logical_id in str(policy["Properties"]["PolicyDocument"])}


def test_a_paced_pipeline_of_several_instances_has_one_on_demand_pace_table_keyed_by_lane():
    pipeline, template = build(**PACED)
    [(name, table)] = pace_tables(template).items()
    props = table["Properties"]
    assert props["KeySchema"] == [{"AttributeName": PaceSeat.LANE, "KeyType": "HASH"}]
    assert props["AttributeDefinitions"] == [{"AttributeName": PaceSeat.LANE, "AttributeType": "S"}]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    # One counter per lane: nothing to stream, expire or restore.
    assert "StreamSpecification" not in props and "TimeToLiveSpecification" not in props
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": False}
    assert table["DeletionPolicy"] == "Retain"  # the pipeline's removal_policy, as the dedupe table's
    assert pipeline.pace_table is not None and cdk.Stack.of(pipeline).get_logical_id(
        pipeline.pace_table.node.default_child) == name
    _, destroyed = build(removal_policy=cdk.RemovalPolicy.DESTROY, **PACED)
    [table] = pace_tables(destroyed).values()
    assert table["DeletionPolicy"] == "Delete"


def test_the_pace_table_is_under_the_customer_key_like_the_dedupe_table():
    stack = make_stack()
    key = kms.Key(stack, "Key")
    _, template = build(stack, encryption_key=key, **PACED)
    [table] = pace_tables(template).values()
    key_id = stack.get_logical_id(key.node.default_child)
    assert table["Properties"]["SSESpecification"] == {
        "KMSMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]}, "SSEEnabled": True, "SSEType": "KMS"}
    [table_id] = pace_tables(template)
    [consumer_policy] = statements_naming(template, table_id)
    key_actions = {action for statement in statements_naming(template, key_id)[consumer_policy]
                   for action in statement["Action"]}
    assert {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"} <= key_actions


def test_both_lanes_take_seats_with_urgent_lane_and_no_other_function_is_told_of_the_table():
    _, template = build(urgent_lane=True, **PACED)  # the urgent lane's two instances are derived from the share
    [table_id] = pace_tables(template)
    by_function = pace_table_by_function(template)
    consumers = {name for name, function in template.find_resources("AWS::Lambda::Function").items()
                 if function["Properties"]["Handler"] == CONSUMER_HANDLER}
    lanes = {template.find_resources("AWS::Lambda::Function")[name]["Properties"]["Environment"]["Variables"][Env.LANE]
             for name in consumers}
    assert lanes == {Priority.BULK.value, Priority.URGENT.value}
    assert {name for name, value in by_function.items() if value is not None} == consumers
    assert all(by_function[name] == {"Ref": table_id} for name in consumers)


def test_a_per_instance_rate_without_a_cap_takes_seats_as_lambda_scales_out():
    _, template = build(max_send_rate=0.5)
    [table_id] = pace_tables(template)
    assert pace_table_by_function(template)["ReceiptsConsumer2A19002C"] == {"Ref": table_id}


def test_each_consumer_may_only_update_items_of_the_pace_table():
    _, template = build(urgent_lane=True, **PACED)
    [table_id] = pace_tables(template)
    by_policy = statements_naming(template, table_id)
    assert sorted(name[: -len("ABCDEF12")] for name in by_policy) == [
        "ReceiptsConsumerRoleDefaultPolicy", "ReceiptsUrgentConsumerRoleDefaultPolicy"]
    for statements in by_policy.values():
        [statement] = statements
        assert statement["Action"] == "dynamodb:UpdateItem"
        assert statement["Resource"] == [{"Fn::GetAtt": [table_id, "Arn"]}]  # the table alone, no index


@pytest.mark.parametrize("props", [
    {}, {"max_concurrency": 5}, {"urgent_lane": True, "max_concurrency": 5},
    {"max_send_rate": 0.5, "reserved_concurrent_executions": 1},
    {"send_rate": 14, "max_concurrency": 5}, {"max_send_rate": 3.0},
], ids=["unpaced", "capped but unpaced", "unpaced lanes", "paced on one instance",
        "above one a second an instance", "a per-instance rate above one a second"])
def test_no_pace_table_when_no_lane_is_paced_on_more_than_one_instance(props):
    pipeline, template = build(**props)
    assert pace_tables(template) == {} and pipeline.pace_table is None
    assert set(pace_table_by_function(template).values()) == {None}
    assert "PaceTable" not in str(template.to_json())  # no grant, no reference
