"""Each lane bounds how long SES keeps trying to deliver its emails (``max_delivery_duration``,
``urgent_max_delivery_duration``: a configuration set's MaxDeliverySeconds); the urgent lane sends through a
configuration set of its own, whose events are the same evidence as the other's."""

from __future__ import annotations

import json
import re

import aws_cdk as cdk
import pytest
from construct_support import build, pipeline_resources, policy_statements

from sendonce_constructs import SendOnceConfigurationError
from sendonce_contract.deploy_config import Env

HOURS, MINUTES = cdk.Duration.hours, cdk.Duration.minutes


def sets_by_id(template: cdk.assertions.Template) -> dict[str, dict]:
    return {name: resource.get("Properties", {})
            for name, resource in template.find_resources("AWS::SES::ConfigurationSet").items()}


def lane_sets(template: cdk.assertions.Template) -> dict[str, object]:
    """Each lane's consumer's configuration set, as its environment names it (a Ref to the set's logical id)."""
    found = {}
    for function in pipeline_resources(template, "AWS::Lambda::Function").values():
        env = function["Properties"].get("Environment", {}).get("Variables", {})
        if Env.LANE in env:
            found[env[Env.LANE]] = env.get(Env.CONFIGURATION_SET)
    return found


def test_each_lane_has_its_own_delivery_window_and_the_urgent_one_its_own_configuration_set():
    _, template = build(urgent_lane=True, max_delivery_duration=HOURS(2),
                        urgent_max_delivery_duration=MINUTES(10))
    sets = sets_by_id(template)
    windows = {name: properties.get("DeliveryOptions", {}).get("MaxDeliverySeconds")
               for name, properties in sets.items()}
    [bulk_set] = [name for name in windows if "Urgent" not in name]
    [urgent_set] = [name for name in windows if "Urgent" in name]
    assert (windows[bulk_set], windows[urgent_set]) == (7200, 600)
    assert lane_sets(template) == {"bulk": {"Ref": bulk_set}, "urgent": {"Ref": urgent_set}}
    # Both sets publish SES's events to the default bus, where the pipeline's rule matches its tag.
    destinations = template.find_resources("AWS::SES::ConfigurationSetEventDestination").values()
    assert sorted(d["Properties"]["ConfigurationSetName"]["Ref"] for d in destinations) == sorted(
        [bulk_set, urgent_set])
    # Each lane's consumer may send through its own set only.
    sends = [s for s in policy_statements(template) if "ses:SendEmail" in json.dumps(s["Action"])]
    granted = sorted(bulk_set if bulk_set in json.dumps(s["Resource"]) and urgent_set not in json.dumps(s["Resource"])
                     else urgent_set for s in sends)
    assert granted == sorted([bulk_set, urgent_set])


def test_without_an_urgent_window_the_urgent_lanes_own_set_keeps_the_bulk_lanes_window():
    _, plain = build(urgent_lane=True)
    _, windowed = build(urgent_lane=True, max_delivery_duration=HOURS(2))
    assert list(sets_by_id(plain)) == list(sets_by_id(windowed))
    [bulk_set] = [name for name in sets_by_id(windowed) if "Urgent" not in name]
    [urgent_set] = [name for name in sets_by_id(windowed) if "Urgent" in name]
    assert [sets_by_id(windowed)[name]["DeliveryOptions"] for name in (bulk_set, urgent_set)] == [
        {"MaxDeliverySeconds": 7200}] * 2
    assert lane_sets(windowed) == {"bulk": {"Ref": bulk_set}, "urgent": {"Ref": urgent_set}}
    assert all("DeliveryOptions" not in properties for properties in sets_by_id(plain).values())


def test_the_users_own_set_is_both_lanes():
    _, shared = build(urgent_lane=True, configuration_set="users-set")
    assert sets_by_id(shared) == {}
    assert lane_sets(shared) == {"bulk": "users-set", "urgent": "users-set"}


def test_an_ses_tenant_has_both_lanes_sets_associated():
    stack = cdk.Stack(cdk.App(), "Test")
    from sendonce_constructs import SendOnceEmailQueue

    receipts = SendOnceEmailQueue(stack, "Receipts", sender="example.com", ses_tenants=True, urgent_lane=True,
                                  urgent_max_delivery_duration=MINUTES(10))
    receipts.add_ses_tenant("acme")
    [tenant] = cdk.assertions.Template.from_stack(stack).find_resources("AWS::SES::Tenant").values()
    associated = json.dumps(tenant["Properties"]["ResourceAssociations"])
    assert len(re.findall(":configuration-set/", associated)) == 2
    assert len(receipts.ses_tenant_resources) == len(set(receipts.ses_tenant_resources)) == 3  # identity, 2 sets


@pytest.mark.parametrize(("props", "message"), [
    ({"max_delivery_duration": MINUTES(4)},
     "max_delivery_duration (240 s) must be between 5 minutes and 14 hours (SES's MaxDeliverySeconds): how long SES "
     "keeps trying to deliver an email; for example Duration.minutes(15) for one-time codes"),
    ({"max_delivery_duration": HOURS(15)}, "max_delivery_duration (54000 s) must be between 5 minutes and 14 hours"),
    ({"max_delivery_duration": HOURS(2), "configuration_set": "transactional"},
     "max_delivery_duration sets the delivery options of the configuration set this construct makes, and it makes "
     "none when configuration_set is given or ses_events=False; set MaxDeliverySeconds on your own configuration "
     "set instead, or drop configuration_set"),
    ({"urgent_lane": True, "urgent_max_delivery_duration": MINUTES(10), "ses_events": False},
     "urgent_max_delivery_duration sets the delivery options of the configuration set this construct makes"),
    ({"urgent_max_delivery_duration": MINUTES(10)},
     "urgent_max_delivery_duration was given without urgent_lane: it is the urgent lane's; set urgent_lane=True, "
     "or give max_delivery_duration for the pipeline's one lane"),
], ids=["below SES's five minutes", "past SES's fourteen hours", "on a set given", "without SES's events",
        "urgent without its lane"])
def test_a_delivery_window_ses_would_refuse_fails_synth_naming_the_value_the_rule_and_the_fix(props, message):
    with pytest.raises(SendOnceConfigurationError, match=re.escape(message)) as raised:
        build(**props)
    assert raised.value.id == "SendOnce.InvalidMaxDeliveryDuration"
