"""`urgent_lane`: what the construct builds for it, what it leaves alone without it, and the props it refuses."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from construct_support import build, make_stack

from sendonce_constructs import SendOnceConfigurationError
from sendonce_contract.deploy_config import Env
from sendonce_contract.priority import Priority
from sendonce_contract.schema import LaneWorkItem

LANES = {"urgent_lane": True, "send_rate": 14, "max_concurrency": 5}


def functions_by_lane(template: cdk.assertions.Template) -> dict[str, dict[str, str]]:
    found = template.find_resources("AWS::Lambda::Function")
    return {resource["Properties"]["Environment"]["Variables"][Env.LANE]: resource["Properties"]["Environment"][
        "Variables"] for resource in found.values()
        if Env.LANE in resource["Properties"].get("Environment", {}).get("Variables", {})}


def test_without_urgent_lane_nothing_of_it_is_made_and_the_consumer_is_unchanged():
    pipeline, template = build(send_rate=14, max_concurrency=5)
    assert pipeline.urgent_queue is None and pipeline.urgent_function is None
    assert not [name for name in template.to_json()["Resources"] if "Urgent" in name]
    assert functions_by_lane(template) == {}


def test_the_urgent_queue_is_of_the_job_queues_kind_with_its_own_dlq():
    stack = make_stack()
    key = kms.Key(stack, "Key")
    pipeline, template = build(stack, fifo=True, encryption_key=key, retention_period=cdk.Duration.days(2),
                               **LANES)
    resources = template.to_json()["Resources"]
    queues = {name: resource["Properties"] for name, resource in resources.items()
              if resource["Type"] == "AWS::SQS::Queue" and name.startswith("Receipts") and "Evidence" not in name}
    [main] = [p for n, p in queues.items() if n.startswith("ReceiptsQueue")]
    [urgent] = [p for n, p in queues.items() if n.startswith("ReceiptsUrgentQueue")]
    [urgent_dlq_id] = [n for n in queues if n.startswith("ReceiptsUrgentDeadLetterQueue")]
    for same in ("FifoQueue", "KmsMasterKeyId", "MessageRetentionPeriod", "VisibilityTimeout"):
        assert urgent[same] == main[same], same
    assert urgent["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": [urgent_dlq_id, "Arn"]}
    assert urgent["RedrivePolicy"]["maxReceiveCount"] == main["RedrivePolicy"]["maxReceiveCount"]
    assert queues[urgent_dlq_id]["FifoQueue"] is True
    assert pipeline.urgent_queue is not None and pipeline.urgent_dead_letter_queue is not None


def test_the_lanes_split_send_rate_and_bulk_may_read_the_urgent_lane_s_work_item_to_borrow_its_share():
    pipeline, template = build(urgent_share=0.2, **LANES)
    lanes = functions_by_lane(template)
    # 14/s over 5 bulk instances: 2.24/s each of their own, 0.56/s each lent; urgent: 2 instances of 1.4/s.
    assert lanes[Priority.BULK.value][Env.MAX_SEND_RATE] == "2.24"
    assert lanes[Priority.BULK.value][Env.LENT_SEND_RATE] == "0.56"
    assert Env.LENT_SEND_RATE not in lanes[Priority.URGENT.value]
    assert lanes[Priority.URGENT.value][Env.MAX_SEND_RATE] == "1.4"
    mappings = template.find_resources("AWS::Lambda::EventSourceMapping")
    concurrency = {name: m["Properties"].get("ScalingConfig", {}).get("MaximumConcurrency")
                   for name, m in mappings.items() if "SqsEventSource" in name and "Evidence" not in name}
    assert sorted(concurrency.values()) == [2, 5]
    # Bulk's consumer may read the urgent lane's work item, and no other item of the table; the urgent lane's reads
    # none (it writes the item, as it writes its claims).
    assert pipeline.urgent_function is not None and pipeline.urgent_queue is not None
    stack = cdk.Stack.of(pipeline)
    roles = {lane: stack.get_logical_id(role.node.default_child) for lane, role in (
        ("bulk", pipeline.role), ("urgent", pipeline.urgent_function.role))}
    reads = {lane: [statement for policy in template.find_resources("AWS::IAM::Policy").values()
                    if {"Ref": role} in policy["Properties"]["Roles"]
                    for statement in policy["Properties"]["PolicyDocument"]["Statement"]
                    if "dynamodb:GetItem" in json.dumps(statement["Action"])] for lane, role in roles.items()}
    assert reads["urgent"] == []
    [read] = reads["bulk"]
    assert read["Action"] == "dynamodb:GetItem"
    assert read["Condition"] == {"ForAllValues:StringEquals": {
        "dynamodb:LeadingKeys": [LaneWorkItem.key(pipeline.pipeline_name)]}}
    assert Env.URGENT_QUEUE_URL not in lanes[Priority.BULK.value]  # no queue of the urgent lane's is read


def test_each_lanes_consumer_puts_delayed_copies_back_on_its_own_queue_and_dead_letters_to_its_own_dlq():
    _, template = build(**LANES)
    lanes = functions_by_lane(template)
    urgent, bulk = lanes[Priority.URGENT.value], lanes[Priority.BULK.value]
    assert urgent[Env.QUEUE_URL]["Ref"].startswith("ReceiptsUrgentQueue")
    assert urgent[Env.DLQ_URL]["Ref"].startswith("ReceiptsUrgentDeadLetterQueue")
    assert bulk[Env.QUEUE_URL]["Ref"].startswith("ReceiptsQueue")
    assert bulk[Env.DLQ_URL]["Ref"].startswith("ReceiptsDeadLetterQueue")


def test_the_urgent_lane_has_its_own_outputs_alarms_and_a_tighter_oldest_job_alarm():
    pipeline, template = build(**LANES)
    outputs = template.to_json()["Outputs"]
    assert any(name.startswith("ReceiptsUrgentQueueUrl") for name in outputs)
    assert any(name.startswith("ReceiptsUrgentDeadLetterQueueUrl") for name in outputs)
    assert {"UrgentDeadLetterQueueNotEmpty", "UrgentOldestMessageTooOld", "UrgentFunctionErrors"} <= set(
        pipeline.alarms)
    thresholds = {name: alarm.node.default_child.threshold for name, alarm in pipeline.alarms.items()}
    assert thresholds["UrgentOldestMessageTooOld"] == 60 < thresholds["OldestMessageTooOld"]


def test_every_resource_keeps_its_logical_id_when_urgent_lane_is_turned_on():
    _, without = build(send_rate=14, max_concurrency=5)
    _, with_lanes = build(**LANES)
    before = set(without.to_json()["Resources"])
    after = set(with_lanes.to_json()["Resources"])
    assert before <= after  # nothing renamed: the urgent lane only adds


@pytest.mark.parametrize(("props", "message"), [
    ({"urgent_share": 0.3, "send_rate": 14, "max_concurrency": 5},
     "urgent_share (0.3) was given without urgent_lane: the share is the urgent lane's; set urgent_lane=True"),
    ({"urgent_lane": True, "urgent_share": 0.3},
     "urgent_share (0.3) needs send_rate: it is a share of the pipeline's send rate; set send_rate"),
    ({**LANES, "urgent_share": 1.0}, "urgent_share (1) must be above 0 and below 1"),
    ({**LANES, "urgent_share": 0}, "urgent_share (0) must be above 0 and below 1"),
    ({"urgent_lane": True, "max_send_rate": 3.0, "max_concurrency": 5},
     "urgent_lane with max_send_rate (3/s per instance): the lanes split the pipeline's rate"),
    ({**LANES, "urgent_oldest_message_alarm_threshold": cdk.Duration.hours(1)},
     "urgent_oldest_message_alarm_threshold (3600 s) is above oldest_message_alarm_threshold (900 s)"),
    ({"urgent_oldest_message_alarm_threshold": cdk.Duration.minutes(2)},
     "urgent_oldest_message_alarm_threshold (120 s) was given without urgent_lane"),
], ids=["share without lane", "share without rate", "share of one", "share of zero", "per-instance rate",
        "alarm later than bulk's", "alarm without lane"])
def test_lane_props_that_cannot_hold_fail_synth_naming_the_prop_value_rule_and_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)


def test_an_urgent_lane_without_a_send_rate_is_a_queue_of_its_own_unpaced():
    pipeline, template = build(urgent_lane=True)
    lanes = functions_by_lane(template)
    assert Env.MAX_SEND_RATE not in lanes[Priority.URGENT.value]
    assert Env.MAX_SEND_RATE not in lanes[Priority.BULK.value] and Env.LENT_SEND_RATE not in lanes[
        Priority.BULK.value]
    assert pipeline.urgent_queue is not None


def event_sources_by_queue(template: cdk.assertions.Template) -> dict[str, dict]:
    found = template.find_resources("AWS::Lambda::EventSourceMapping")
    return {source["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: source["Properties"]
            for source in found.values() if "Fn::GetAtt" in source["Properties"]["EventSourceArn"]}


def test_a_lane_asks_for_provisioned_pollers_on_its_own_event_source():
    """The urgent lane's latency floor: its event source in provisioned mode with the pollers asked for, no cap on
    its concurrency (Lambda takes one or the other); bulk's stays in Lambda's standard mode."""
    pipeline, template = build(urgent_lane=True, urgent_provisioned_pollers=lambda_.ProvisionedPollerConfig(
        minimum_pollers=2, maximum_pollers=20))
    sources = event_sources_by_queue(template)
    urgent = sources[cdk.Stack.of(pipeline).get_logical_id(pipeline.urgent_queue.node.default_child)]
    bulk = sources[cdk.Stack.of(pipeline).get_logical_id(pipeline.queue.node.default_child)]
    assert urgent["ProvisionedPollerConfig"] == {"MinimumPollers": 2, "MaximumPollers": 20}
    assert "ScalingConfig" not in urgent
    assert "ProvisionedPollerConfig" not in bulk


def test_the_one_lane_takes_provisioned_pollers_too():
    pipeline, template = build(provisioned_pollers=lambda_.ProvisionedPollerConfig(minimum_pollers=3))
    source = event_sources_by_queue(template)[cdk.Stack.of(pipeline).get_logical_id(pipeline.queue.node.default_child)]
    assert source["ProvisionedPollerConfig"] == {"MinimumPollers": 3} and "ScalingConfig" not in source


@pytest.mark.parametrize(("props", "message"), [
    ({"provisioned_pollers": lambda_.ProvisionedPollerConfig(minimum_pollers=1)},
     "provisioned_pollers's minimum_pollers (1) must be between 2 and 200 (SQS's range for provisioned mode"),
    ({"provisioned_pollers": lambda_.ProvisionedPollerConfig(maximum_pollers=5000)},
     "provisioned_pollers's maximum_pollers (5000) must be between 2 and 2000"),
    ({"provisioned_pollers": lambda_.ProvisionedPollerConfig(minimum_pollers=10, maximum_pollers=4)},
     "provisioned_pollers's minimum_pollers (10) is above its maximum_pollers (4)"),
    ({**LANES, "urgent_provisioned_pollers": lambda_.ProvisionedPollerConfig(minimum_pollers=2)},
     "urgent_provisioned_pollers was given with max_concurrency (5): Lambda takes provisioned pollers or a "
     "maximum concurrency on an event source, not both, and a lane paced by send_rate needs its cap; leave "
     "max_concurrency (and send_rate) unset for a lane with provisioned pollers, or drop urgent_provisioned_pollers"),
    ({"urgent_provisioned_pollers": lambda_.ProvisionedPollerConfig(minimum_pollers=2)},
     "urgent_provisioned_pollers was given without urgent_lane: it is the urgent lane's pollers; set "
     "urgent_lane=True, or give provisioned_pollers for the pipeline's one lane"),
    ({"provisioned_pollers": {"minimum_pollers": 2}},
     "provisioned_pollers ({'minimum_pollers': 2}, a dict) must be an aws_lambda.ProvisionedPollerConfig"),
], ids=["one poller", "maximum past SQS's", "minimum above maximum", "beside a paced lane's cap",
        "urgent without its lane", "a dict"])
def test_provisioned_pollers_that_cannot_hold_fail_synth_naming_the_prop_value_rule_and_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)
