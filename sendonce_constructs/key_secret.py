"""key_privacy's secret: the HMAC key under which every dedupe key is digested, kept in Secrets Manager.

Losing or changing it changes every digest, so every record would be forgotten and every job in the queues
sent again: it is retained when the stack is deleted, and never rotated (the acknowledgement says why).
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sendonce_contract.stack_names import ChildId

from .acknowledgements import acknowledge

SECRET_LENGTH = 64  # characters of letters and digits: 380 bits, more than SHA-256's block needs


def build_key_secret(scope: Construct, encryption_key: kms.IKey | None) -> secretsmanager.Secret:
    secret = secretsmanager.Secret(
        scope, ChildId.KEY_SECRET,
        description="sendonce key_privacy: the HMAC-SHA256 key that digests each dedupe key; changing or deleting "
                    "it forgets every record",
        generate_secret_string=secretsmanager.SecretStringGenerator(
            password_length=SECRET_LENGTH, exclude_punctuation=True, include_space=False),
        encryption_key=encryption_key,
        removal_policy=RemovalPolicy.RETAIN,
    )
    acknowledge(secret, "AwsSolutions-SMG4",
                "Not rotated on purpose: each dedupe key is stored as its HMAC under this secret, so a new value "
                "would forget every record and every job still queued would be sent again.")
    return secret
