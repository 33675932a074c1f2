"""Does by API what the emulator's CloudFormation skips for a deployed stack (the patches of ``emulator`` cannot:
these need the deployed stack), and says what it did."""

from __future__ import annotations

from pathlib import Path

import boto3
from botocore.exceptions import ClientError

from sendonce_contract.deploy_config import Env
from sendonce_contract.schema import Ledger

from .deployed_stack import physical_ids, read_template

CONFIGURATION_SET_VARIABLE = Env.CONFIGURATION_SET


def apply_ttl(table_name: str) -> str:
    boto3.client("dynamodb").update_time_to_live(
        TableName=table_name, TimeToLiveSpecification={"AttributeName": Ledger.EXPIRES_AT, "Enabled": True}
    )
    return (f"moto's CloudFormation ignores TimeToLiveSpecification: TTL on {Ledger.EXPIRES_AT} was applied with the "
            "API (moto never deletes expired items; the consumer treats them as absent anyway)")


def make_skipped_configuration_sets(stack_name: str, cdk_out: Path) -> list[str]:
    """moto's CloudFormation skips AWS::SES::ConfigurationSet, so a function whose environment names one by Ref
    gets no value. Create each such set by API under a name of its logical id, and give the functions that name.
    Returns the names made."""
    resources = read_template(stack_name, cdk_out)["Resources"]
    deployed = physical_ids(stack_name, cdk_out)
    lambda_client, ses = boto3.client("lambda"), boto3.client("sesv2")
    made: set[str] = set()
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::Lambda::Function" or logical_id not in deployed:
            continue
        reference = resource["Properties"].get("Environment", {}).get("Variables", {}).get(CONFIGURATION_SET_VARIABLE)
        target = reference.get("Ref") if isinstance(reference, dict) else None
        if target is None or resources.get(target, {}).get("Type") != "AWS::SES::ConfigurationSet":
            continue
        name = f"{stack_name}-{target}"[:64]
        if name not in made:
            try:
                ses.create_configuration_set(ConfigurationSetName=name)
            except ClientError as error:  # made by an earlier run against this emulator
                if "AlreadyExists" not in error.response.get("Error", {}).get("Code", ""):
                    raise
            made.add(name)
        function = deployed[logical_id][1]
        variables = lambda_client.get_function_configuration(FunctionName=function).get(
            "Environment", {}).get("Variables", {})
        lambda_client.update_function_configuration(
            FunctionName=function, Environment={"Variables": {**variables, CONFIGURATION_SET_VARIABLE: name}})
    return sorted(made)
