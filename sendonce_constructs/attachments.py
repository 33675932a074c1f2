"""The attachments bucket: where a job's files too large to carry inline wait as S3 claim checks (the job names a
bucket and a key) until the consumer attaches them. The producers write to it (``grant_attach``), the consumer reads
from it and from no other bucket.

A bucket the construct makes keeps each object as long as its job can still be sent (``rules.attachment_lifetime_
terms``) and no longer: attachments are personal files, and a claim check outliving its job serves nobody.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sendonce_contract.stack_names import ChildId

from .acknowledgements import acknowledge, wildcard_resource_finding

EXPIRY_RULE_ID = "ExpireAttachments"
# What a producer needs: PutObject (an object's key derives from its job's key and its content, and the producer puts
# it only if no object has the key, so a retried producer writes it once; no read, no list). With a customer key,
# S3 asks KMS for a data key on a put, and to decrypt it again between the parts of a multipart upload.
PRODUCER_ACTIONS = ("s3:PutObject",)
PRODUCER_KEY_ACTIONS = ("kms:GenerateDataKey", "kms:Decrypt")
CONSUMER_ACTIONS = ("s3:GetObject",)
# On the bucket itself: without ListBucket, S3 answers a GetObject of a missing key with 403, not 404, and the
# consumer could not tell a claim check naming no object (dead-lettered at once as attachment-missing) from a
# permission it lacks (a deployment error, retried).
CONSUMER_BUCKET_ACTIONS = ("s3:ListBucket",)
CONSUMER_KEY_ACTIONS = ("kms:Decrypt",)
# An upload a producer abandoned half way is cleaned up within a day (its parts are billed until then).
ABANDONED_UPLOAD_DAYS = 1


@dataclass(frozen=True)
class Attachments:
    """The bucket (made or brought), its customer key if CDK knows one, and how long the construct's own bucket keeps
    an object (None for a bucket brought)."""

    bucket: s3.IBucket
    key: kms.IKey | None
    expiry: Duration | None

    def grant_read(self, grantee: iam.IGrantable, *, with_key: bool = True) -> iam.Grant:
        """GetObject on the bucket's objects (HeadObject too), ListBucket on the bucket (so a missing object is a
        404) and, ``with_key``, decrypting with its key: the consumer's access."""
        grant = self._grant(grantee, CONSUMER_ACTIONS, CONSUMER_KEY_ACTIONS if with_key else ())
        return grant.combine(iam.Grant.add_to_principal(grantee=grantee, actions=list(CONSUMER_BUCKET_ACTIONS),
                                                        resource_arns=[self.bucket.bucket_arn]))

    def grant_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """PutObject on the bucket's objects and what its customer key needs for it: a producer's access."""
        return self._grant(grantee, PRODUCER_ACTIONS, PRODUCER_KEY_ACTIONS)

    def _grant(self, grantee: iam.IGrantable, actions: tuple[str, ...], key_actions: tuple[str, ...]) -> iam.Grant:
        grant = iam.Grant.add_to_principal(grantee=grantee, actions=list(actions),
                                           resource_arns=[self.bucket.arn_for_objects("*")])
        if self.key is not None and key_actions:
            grant = grant.combine(self.key.grant(grantee, *key_actions))
        return grant


def build_attachments(scope: Construct, bucket: bool | s3.IBucket, expiry_days: int | None,
                      encryption_key: kms.IKey | None, removal_policy: RemovalPolicy) -> Attachments | None:
    """None with ``attachments_bucket=False``; the bucket given; or a new one whose objects expire after
    ``expiry_days`` (the rules refused a bucket to make without it)."""
    if bucket is False:
        return None
    if bucket is not True:
        assert not isinstance(bucket, bool)
        return Attachments(bucket=bucket, key=bucket.encryption_key, expiry=None)
    assert expiry_days is not None
    expiry = Duration.days(expiry_days)
    made = s3.Bucket(
        scope, ChildId.ATTACHMENTS_BUCKET,
        # As the queues: S3-managed keys, the customer key when one is given.
        encryption=s3.BucketEncryption.KMS if encryption_key is not None else s3.BucketEncryption.S3_MANAGED,
        encryption_key=encryption_key,
        bucket_key_enabled=True if encryption_key is not None else None,  # one KMS call per object, not per read
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        # No versioning: an object is written once per content and never changed; versions would outlive the expiry.
        versioned=False,
        lifecycle_rules=[s3.LifecycleRule(
            id=EXPIRY_RULE_ID, expiration=expiry,
            abort_incomplete_multipart_upload_after=Duration.days(ABANDONED_UPLOAD_DAYS))],
        # As the queues: a retained queue's jobs still name their attachments.
        removal_policy=removal_policy,
    )
    acknowledge(made, "AwsSolutions-S1",
                "Claim-check objects live days and are written and read only by the pipeline's own roles; CloudTrail "
                "data events record every access where an audit trail is wanted, without a second bucket to keep.")
    return Attachments(bucket=made, key=encryption_key, expiry=expiry)


def objects_finding(bucket: s3.IBucket) -> str:
    """The AwsSolutions-IAM5 finding id of a grant on the bucket's objects (``<bucket ARN>/*``), as cdk-nag names it."""
    return wildcard_resource_finding(bucket, bucket.bucket_arn + "/*")
