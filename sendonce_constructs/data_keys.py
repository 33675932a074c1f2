"""The customer-managed KMS keys a bundled function's data is under, granted with the findings they bring."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from .acknowledgements import acknowledge


def grant_data_keys(keys: Sequence[kms.IKey], grantee: iam.IGrantable, role: iam.IRole) -> None:
    """Encrypt and decrypt on each key; CDK's grant uses action families that cdk-nag flags on ``role``."""
    for key in keys:
        key.grant_encrypt_decrypt(grantee)
    if keys:
        for family in ("kms:GenerateDataKey*", "kms:ReEncrypt*"):
            acknowledge(role, f"AwsSolutions-IAM5[Action::{family}]",
                        "CDK's encrypt/decrypt grant on the customer keys given (encryption_key, an existing table's "
                        "own key); the action family covers the key-spec variants SQS and DynamoDB call.")
