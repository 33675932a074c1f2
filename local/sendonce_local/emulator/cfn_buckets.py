"""Teaches moto's CloudFormation the S3 bucket properties it ignores (moto 5.2 applies only ``BucketEncryption`` and
``Tags``), so that an attachments bucket deploys to the emulator as it does to AWS: its lifecycle rules (the
expiry synth derived) and its public access block are set through moto's own S3 calls. Only what a template of this
project uses is translated: a rule's ``Id``, ``Status``, ``Prefix``, ``ExpirationInDays``, ``ExpirationDate``,
``Transitions`` and ``AbortIncompleteMultipartUpload``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from .wrap import wrap_once


def _api_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule as moto's S3 parses PutBucketLifecycleConfiguration's XML."""
    api: dict[str, Any] = {"ID": rule.get("Id"), "Status": rule.get("Status", "Enabled"),
                           "Filter": {"Prefix": rule.get("Prefix", "")}}
    if "ExpirationInDays" in rule:
        api["Expiration"] = {"Days": str(rule["ExpirationInDays"])}
    elif "ExpirationDate" in rule:
        api["Expiration"] = {"Date": str(rule["ExpirationDate"])}
    transitions = [{"Days": str(t["TransitionInDays"]), "StorageClass": t["StorageClass"]}
                   for t in rule.get("Transitions", []) if "TransitionInDays" in t]
    if transitions:
        api["Transition"] = transitions
    abort = rule.get("AbortIncompleteMultipartUpload")
    if abort:
        api["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": str(abort["DaysAfterInitiation"])}
    return api


def _configured(create: Callable[..., Any]) -> Callable[..., Any]:
    def create_from_cloudformation_json(_cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str,
                                        region_name: str, **kwargs: Any) -> Any:
        from moto.s3.models import s3_backends
        from moto.utilities.utils import get_partition

        bucket = create(resource_name, cloudformation_json, account_id, region_name, **kwargs)
        backend = s3_backends[account_id][get_partition(region_name)]
        properties = cloudformation_json.get("Properties", {})
        rules = properties.get("LifecycleConfiguration", {}).get("Rules")
        if rules:
            backend.put_bucket_lifecycle_configuration(bucket.name, [_api_rule(rule) for rule in rules])
        block = properties.get("PublicAccessBlockConfiguration")
        if block:
            backend.put_public_access_block(bucket.name, {key: str(value).lower() for key, value in block.items()})
        return bucket

    return cast(Callable[..., Any], classmethod(create_from_cloudformation_json))


def configure_cloudformation_buckets() -> None:
    """Wrap the bucket model's creation from a template (idempotent)."""
    from moto.s3.models import FakeBucket

    original = FakeBucket.create_from_cloudformation_json  # bound to the class: called without cls
    wrap_once(FakeBucket, "create_from_cloudformation_json", lambda _: _configured(original),
              "bucket lifecycle and public access block")
