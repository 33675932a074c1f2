"""Teaches moto's CloudFormation ``AWS::SecretsManager::Secret``, which it skips (moto 5.2: "not supported"), so
that a stack with ``key_privacy`` deploys to the emulator as it does to AWS: the secret is made in moto's Secrets
Manager, with ``SecretString`` or a value drawn as ``GenerateSecretString`` asks, and ``Ref`` gives its ARN (the
consumer's environment and the IAM grants name it). Only what a template of this project uses is played:
``Name``, ``Description``, ``SecretString``, ``GenerateSecretString`` (length, punctuation, space); ``KmsKeyId`` is
ignored, as moto's own API does not encrypt.
"""

from __future__ import annotations

import json
import secrets
import string
from typing import Any

_installed = False


def _generated(options: dict[str, Any]) -> str:
    alphabet = string.ascii_letters + string.digits
    if str(options.get("ExcludePunctuation", "false")).lower() != "true":
        alphabet += "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    if str(options.get("IncludeSpace", "false")).lower() == "true":
        alphabet += " "
    excluded = str(options.get("ExcludeCharacters", ""))
    alphabet = "".join(c for c in alphabet if c not in excluded)
    return "".join(secrets.choice(alphabet) for _ in range(int(options.get("PasswordLength", 32))))


def teach_cloudformation_secrets() -> None:
    """Register the model with moto's CloudFormation (idempotent)."""
    global _installed
    if _installed:
        return
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel
    from moto.secretsmanager.models import secretsmanager_backends

    class CfnSecret(CloudFormationModel):
        def __init__(self, arn: str, name: str, account_id: str, region: str) -> None:
            self.arn, self.name, self.account_id, self.region = arn, name, account_id, region

        @property
        def physical_resource_id(self) -> str:
            return self.arn

        @staticmethod
        def cloudformation_name_type() -> str:
            return "Name"

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::SecretsManager::Secret"

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr == "Id"

        def get_cfn_attribute(self, attribute_name: str) -> str:
            return self.arn

        @classmethod
        def create_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
            **kwargs: Any,
        ) -> CfnSecret:
            properties = cloudformation_json.get("Properties", {})
            value = properties.get("SecretString") or _generated(properties.get("GenerateSecretString", {}))
            name = properties.get("Name") or resource_name
            created = secretsmanager_backends[account_id][region_name].create_secret(
                name=name, secret_string=value, secret_binary=None, description=properties.get("Description"),
                tags=None, kms_key_id=None, client_request_token=None, replica_regions=[], force_overwrite=False)
            return cls(json.loads(created)["ARN"], name, account_id, region_name)

        @classmethod
        def update_from_cloudformation_json(
            cls, original_resource: CfnSecret, new_resource_name: str, cloudformation_json: dict[str, Any],
            account_id: str, region_name: str,
        ) -> CfnSecret:
            return original_resource  # the value is kept: a new one would forget every key digested under it

        @classmethod
        def delete_from_cloudformation_json(
            cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
        ) -> None:
            return None  # the construct retains the secret (RemovalPolicy.RETAIN), as CloudFormation then does

    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()
    _installed = CfnSecret.cloudformation_type() in parsing.get_model_map()
