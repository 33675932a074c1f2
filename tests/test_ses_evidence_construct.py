"""The SES evidence part of the construct: on by default, matching this pipeline's events only, checked at synth."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from construct_support import build, only

from sendonce_constructs import SendOnceConfigurationError
from sendonce_contract.deploy_config import Env
from sendonce_contract.key_tags import PIPELINE_TAG

EVENT_TYPES = ["send", "delivery", "bounce", "complaint", "reject", "deliveryDelay", "renderingFailure"]


def resources(template, kind: str) -> dict:
    return {name: r.get("Properties", {}) for name, r in template.find_resources(kind).items()}


def test_a_configuration_set_publishes_every_evidence_event_to_the_default_bus():
    _, template = build()
    [configuration_set] = resources(template, "AWS::SES::ConfigurationSet")
    [destination] = resources(template, "AWS::SES::ConfigurationSetEventDestination").values()
    assert destination["ConfigurationSetName"] == {"Ref": configuration_set}
    event_destination = destination["EventDestination"]
    assert sorted(event_destination["MatchingEventTypes"]) == sorted(EVENT_TYPES)
    assert event_destination["Enabled"] is True
    assert event_destination["EventBridgeDestination"]["EventBusArn"]["Fn::Join"][1][-1] == ":event-bus/default"


def test_the_rule_matches_this_pipelines_emails_only_and_feeds_the_recorders_queue():
    pipeline, template = build()
    [rule] = [r for r in resources(template, "AWS::Events::Rule").values() if "EventPattern" in r]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.ses"]
    assert pattern["detail"] == {"mail": {"tags": {"sendonce-pipeline": [pipeline.node.addr]}}}
    [target] = rule["Targets"]
    assert target["Arn"]["Fn::GetAtt"][0].startswith("ReceiptsSesEvidenceQueue")
    assert target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0].startswith("ReceiptsSesEvidenceDeadLetterQueue")
    recorder = template.find_resources("AWS::Lambda::Function",
                                       {"Properties": {"Handler": "sendonce_runtime.event_recorder.handler"}})
    [props] = [r["Properties"] for r in recorder.values()]
    env = props["Environment"]["Variables"]
    assert env[Env.PIPELINE_TAG] == pipeline.node.addr
    assert env[Env.TABLE_NAME] == {"Ref": "ReceiptsDedupeTable97CEC35F"}
    [mapping] = [m for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
                 if m["EventSourceArn"]["Fn::GetAtt"][0].startswith("ReceiptsSesEvidenceQueue")]
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_two_pipelines_in_one_stack_match_different_tags():
    from sendonce_constructs import SendOnceEmailQueue

    stack = cdk.Stack(cdk.App(), "Two")
    first = SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    second = SendOnceEmailQueue(stack, "Resets", sender="example.com")
    assert first.node.addr != second.node.addr
    # Each pipeline's rule matches its own tag, and its consumer tags its emails with it.
    template = cdk.assertions.Template.from_stack(stack)
    for pipeline in (first, second):
        assert pipeline.evidence is not None
        rule_id = stack.get_logical_id(pipeline.evidence.rule.node.default_child)
        pattern = template.find_resources("AWS::Events::Rule")[rule_id]["Properties"]["EventPattern"]
        assert pattern["detail"]["mail"]["tags"][PIPELINE_TAG] == [pipeline.node.addr]
        consumer = template.find_resources("AWS::Lambda::Function")[
            stack.get_logical_id(pipeline.function.node.default_child)]
        assert consumer["Properties"]["Environment"]["Variables"][Env.PIPELINE_TAG] == pipeline.node.addr


def test_a_users_configuration_set_gets_the_event_destination_and_no_second_set_is_made():
    _, template = build(configuration_set="transactional")
    assert resources(template, "AWS::SES::ConfigurationSet") == {}
    [destination] = resources(template, "AWS::SES::ConfigurationSetEventDestination").values()
    assert destination["ConfigurationSetName"] == "transactional"
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env[Env.CONFIGURATION_SET] == "transactional"


def test_events_can_be_turned_off():
    _, template = build(ses_events=False, outcome_events=False, quota_watch=False, waiting_room=False)
    for kind in ("AWS::SES::ConfigurationSet", "AWS::SES::ConfigurationSetEventDestination", "AWS::Events::Rule"):
        assert resources(template, kind) == {}
    assert len(resources(template, "AWS::Lambda::Function")) == 1
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert Env.EVIDENCE_GRACE_MS not in env and Env.CONFIGURATION_SET not in env


def test_the_grace_period_is_a_prop():
    _, template = build(evidence_grace_period=cdk.Duration.minutes(2))
    env = only(template, "AWS::Lambda::Function")["Properties"]["Environment"]["Variables"]
    assert env[Env.EVIDENCE_GRACE_MS] == "120000"


@pytest.mark.parametrize(("props", "message"), [
    ({"evidence_grace_period": cdk.Duration.seconds(5)},
     "evidence_grace_period (5 s) must be between 10 s and 43200 s"),
    ({"evidence_grace_period": cdk.Duration.hours(13)}, "evidence_grace_period (46800 s) must be between"),
    ({"max_receive_count": 2},
     "max_receive_count (2) must be at least 3 with ses_events: a job whose worker died is received once more"),
    ({"retention_period": cdk.Duration.minutes(10)},
     "retention_period (600 s) must be at least 2 x visibility_timeout (180 s) + evidence_grace_period (300 s) "
     "= 660 s"),
    ({"ses_events": False, "evidence_grace_period": cdk.Duration.minutes(1)},
     "evidence_grace_period was given with ses_events=False"),
], ids=["grace too short", "grace too long", "too few receives", "retention too short", "grace without events"])
def test_evidence_props_that_break_a_guarantee_fail_synth_with_the_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)):
        build(**props)


def test_a_low_max_receive_count_is_fine_without_events():
    pipeline, _ = build(ses_events=False, max_receive_count=2)
    assert pipeline.evidence is None


def test_the_rule_and_the_local_publisher_use_the_contract_s_tag_and_event_types():
    from sendonce_contract.key_tags import PIPELINE_TAG
    from sendonce_contract.schema import SES_EVENT_TYPES
    from sendonce_local.emulator.ses_publisher import eventbridge_event
    from sendonce_runtime.ses_events import parse_event

    _, template = build()
    [rule] = [r for r in resources(template, "AWS::Events::Rule").values() if "EventPattern" in r]
    assert rule["EventPattern"]["detail-type"] == [event.detail_type for event in SES_EVENT_TYPES]
    assert list(rule["EventPattern"]["detail"]["mail"]["tags"]) == [PIPELINE_TAG]
    for event in SES_EVENT_TYPES:  # what the local SES publishes, the recorder reads
        record = {"eventType": event.name, "mail": {"messageId": "m", "timestamp": "2026-11-30T00:00:00.000Z",
                                                    "tags": {"sendonce-key": ["k"], PIPELINE_TAG: ["p"]}},
                  event.record_object: {}}
        published = eventbridge_event(record, "123456789012", "us-east-1")
        assert published["detail-type"] == event.detail_type
        assert parse_event(json.dumps(published)).event_type == event.name


def test_the_configuration_sets_suppression_reasons_are_a_prop_defaulting_to_the_accounts():
    from aws_cdk import aws_ses as ses

    from sendonce_constructs.errors import SendOnceConfigurationError

    def suppression(**props):
        _, template = build(**props)
        [config] = template.find_resources("AWS::SES::ConfigurationSet").values()
        return config.get("Properties", {}).get("SuppressionOptions")

    assert suppression() is None  # the account's own setting applies
    assert suppression(suppression_reasons=ses.SuppressionReasons.BOUNCES_ONLY) == {
        "SuppressedReasons": ["BOUNCE"]}
    assert suppression(disable_suppression_list=True) == {"SuppressedReasons": []}
    with pytest.raises(SendOnceConfigurationError, match="both given"):
        build(suppression_reasons=ses.SuppressionReasons.COMPLAINTS_ONLY, disable_suppression_list=True)
    with pytest.raises(SendOnceConfigurationError, match="makes none when configuration_set is given"):
        build(configuration_set="mine", suppression_reasons=ses.SuppressionReasons.COMPLAINTS_ONLY)
