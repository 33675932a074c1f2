"""The emulator's CloudFormation as `cdk deploy` drives it: change sets reused by name, updates, outputs, failed
deploys rolled back and fixed, FIFO queue names and alarms. Each test failed against moto unpatched."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

CHANGE_SET = "cdk-deploy-change-set"  # the name `cdk deploy` uses for every stack and every deploy
PARAMETERS = {"BootstrapVersion": {"Type": "AWS::SSM::Parameter::Value<String>",
                                   "Default": "/cdk-bootstrap/hnb659fds/version"}}


def _template(*queues: str, timeout: int = 30, broken: bool = False) -> dict[str, Any]:
    resources: dict[str, Any] = {name: {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": timeout}}
                                 for name in queues}
    if broken:
        resources["Broken"] = {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "not a valid name!"}}
    outputs = {f"{name}Url": {"Value": {"Ref": name}, "Description": f"sendonce:Stack/{name}:queue"}
               for name in queues}
    return {"Parameters": PARAMETERS, "Resources": resources, "Outputs": outputs}


def _deploy(stack: str, template: dict[str, Any]) -> str:
    """What `cdk deploy` does: clear a leftover change set, create one, wait, execute; the stack's status."""
    cloudformation = boto3.client("cloudformation")
    try:
        status = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError:
        status = None
    if status == "ROLLBACK_COMPLETE":  # a failed first deploy: cdk deletes the stack and creates it again
        cloudformation.delete_stack(StackName=stack)
        status = None
    if status:  # cdk deletes the name first, whether or not a change set of that name is left
        cloudformation.delete_change_set(StackName=stack, ChangeSetName=CHANGE_SET)
    kind = "UPDATE" if status else "CREATE"
    parameters = ([{"ParameterKey": "BootstrapVersion", "UsePreviousValue": True}] if kind == "UPDATE" else [])
    cloudformation.create_change_set(StackName=stack, ChangeSetName=CHANGE_SET, ChangeSetType=kind,
                                     TemplateBody=json.dumps(template), Parameters=parameters)
    described = cloudformation.describe_change_set(StackName=stack, ChangeSetName=CHANGE_SET)
    assert described["Status"] == "CREATE_COMPLETE", described
    cloudformation.execute_change_set(StackName=stack, ChangeSetName=CHANGE_SET)
    return str(cloudformation.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"])


@pytest.fixture(autouse=True)
def bootstrap_version(aws):
    boto3.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")


def test_a_stack_is_updated_again_and_again_through_change_sets_of_one_name_with_its_outputs():
    assert _deploy("Shop", _template("Jobs")) == "CREATE_COMPLETE"
    assert _deploy("Other", _template("Mail")) == "CREATE_COMPLETE"  # the same change set name, another stack
    assert _deploy("Shop", _template("Jobs", "More", timeout=60)) == "UPDATE_COMPLETE"
    assert _deploy("Shop", _template("Jobs", timeout=90)) == "UPDATE_COMPLETE"
    stack = boto3.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]
    assert [o["OutputKey"] for o in stack["Outputs"]] == ["JobsUrl"]
    assert stack["Outputs"][0]["OutputValue"].startswith("https://") or "Jobs" in stack["Outputs"][0]["OutputValue"]
    url = boto3.client("sqs").get_queue_url(QueueName=stack["Outputs"][0]["OutputValue"].rsplit("/", 1)[-1])
    attributes = boto3.client("sqs").get_queue_attributes(QueueUrl=url["QueueUrl"], AttributeNames=["All"])
    assert attributes["Attributes"]["VisibilityTimeout"] == "90"


def test_an_unknown_change_set_is_not_found_and_deleting_it_succeeds_as_on_aws():
    cloudformation = boto3.client("cloudformation")
    with pytest.raises(cloudformation.exceptions.ChangeSetNotFoundException):
        cloudformation.describe_change_set(StackName="Shop", ChangeSetName=CHANGE_SET)
    assert _deploy("Shop", _template("Jobs")) == "CREATE_COMPLETE"
    cloudformation.delete_change_set(StackName="Shop", ChangeSetName="never-made")


def test_a_deploy_with_no_changes_leaves_no_change_set_and_the_next_changed_deploy_works():
    cloudformation = boto3.client("cloudformation")
    assert _deploy("Shop", _template("Jobs")) == "CREATE_COMPLETE"
    # `cdk deploy` of an unchanged app deletes the change set name, then finds the template deployed already and
    # creates none: the next deploy deletes a name no change set has.
    cloudformation.delete_change_set(StackName="Shop", ChangeSetName=CHANGE_SET)
    assert _deploy("Shop", _template("Jobs", timeout=60)) == "UPDATE_COMPLETE"


def test_a_failed_update_rolls_back_with_its_reason_and_the_fixed_app_deploys():
    assert _deploy("Shop", _template("Jobs")) == "CREATE_COMPLETE"
    assert _deploy("Shop", _template("Jobs", broken=True)) == "UPDATE_ROLLBACK_COMPLETE"
    events = boto3.client("cloudformation").describe_stack_events(StackName="Shop")["StackEvents"]
    failed = [e for e in events if e["ResourceStatus"] == "UPDATE_FAILED"]
    assert failed and "Can only include alphanumeric characters" in failed[0]["ResourceStatusReason"]
    assert _deploy("Shop", _template("Jobs", "Fixed")) == "UPDATE_COMPLETE"
    outputs = boto3.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]["Outputs"]
    assert sorted(o["OutputKey"] for o in outputs) == ["FixedUrl", "JobsUrl"]


def test_a_failed_first_deploy_rolls_back_and_the_next_one_replaces_it():
    assert _deploy("Shop", _template("Jobs", broken=True)) == "ROLLBACK_COMPLETE"
    assert _deploy("Shop", _template("Jobs")) == "CREATE_COMPLETE"


def test_a_fifo_queue_without_a_name_is_named_as_cloudformation_names_it():
    template = {"Parameters": PARAMETERS, "Resources": {"Jobs": {"Type": "AWS::SQS::Queue", "Properties": {
        "FifoQueue": True}}}, "Outputs": {"Url": {"Value": {"Ref": "Jobs"}}}}
    assert _deploy("Shop", template) == "CREATE_COMPLETE"
    outputs = boto3.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]["Outputs"]
    assert outputs[0]["OutputValue"].endswith(".fifo")


def test_an_alarm_is_made_and_its_arn_can_be_referenced():
    template = {"Parameters": PARAMETERS, "Resources": {"Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
        "MetricName": "ApproximateNumberOfMessagesVisible", "Namespace": "AWS/SQS", "Statistic": "Maximum",
        "Period": 60, "EvaluationPeriods": 1, "Threshold": 1, "ComparisonOperator": "GreaterThanThreshold",
        "Dimensions": [{"Name": "QueueName", "Value": "dlq"}]}}},
        "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["Alarm", "Arn"]}}}}
    assert _deploy("Shop", template) == "CREATE_COMPLETE"
    outputs = boto3.client("cloudformation").describe_stacks(StackName="Shop")["Stacks"][0]["Outputs"]
    assert outputs[0]["OutputValue"].startswith("arn:aws:cloudwatch:")
    assert boto3.client("cloudwatch").describe_alarms()["MetricAlarms"]


def test_an_attachments_bucket_deploys_with_its_expiry_and_public_access_block():
    """moto's CloudFormation sets only a bucket's encryption; the emulator sets the rest as AWS does."""
    from construct_support import build

    _, synthesized = build(attachments_bucket=True)
    resources = {name: resource for name, resource in synthesized.to_json()["Resources"].items()
                 if resource["Type"] in ("AWS::S3::Bucket", "AWS::S3::BucketPolicy")}
    assert len(resources) == 2
    outputs = {"Bucket": {"Value": {"Ref": next(n for n, r in resources.items() if r["Type"] == "AWS::S3::Bucket")}}}
    assert _deploy("Attachments", {"Parameters": PARAMETERS, "Resources": resources, "Outputs": outputs}) == (
        "CREATE_COMPLETE")
    name = next(r["PhysicalResourceId"] for r in boto3.client("cloudformation").describe_stack_resources(
        StackName="Attachments")["StackResources"] if r["ResourceType"] == "AWS::S3::Bucket")
    s3 = boto3.client("s3")
    [rule] = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
    assert (rule["ID"], rule["Status"], rule["Expiration"]["Days"]) == ("ExpireAttachments", "Enabled", 34)
    assert rule["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    assert s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"][0][
        "ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
