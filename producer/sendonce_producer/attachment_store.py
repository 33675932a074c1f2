"""Claim checks: a job's large attachments uploaded to the pipeline's attachments bucket and referenced, so the
job body (copied into every delayed copy, DLQ message and redrive) stays small.

An object's key is ``attachments/<key id>/<SHA-256 of the content>``: the key id is the dedupe key's digest (its
keyed digest, as the ledger knows it, under the pipeline's key privacy, so the bucket never shows a private key;
else its plain SHA-256), and it is put only if no object has that key, so a retried producer writes it once. The
bucket's lifecycle expires the objects after the longest time a job can still be sent.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

from .attachments import Attachment
from .job import EmailJob
from .private_keys import ledger_key

# Files larger than this go to the bucket when one is given; smaller ones travel in the job. A job queue takes
# 256 KiB unless max_message_size_bytes says more (1 MiB at most), which a few inline files share with the text.
DEFAULT_INLINE_LIMIT_BYTES = 64 * 1024
KEY_PREFIX = "attachments/"


@dataclass
class AttachmentStore:
    """The pipeline's attachments bucket (the construct's ``attachments_bucket``), as a producer writes to it:
    grant the producer with ``grant_attach(role)``. ``key_secret_arn`` is the construct's ``key_secret`` under
    ``key_privacy``."""

    bucket: str
    s3: Any | None = None
    key_secret_arn: str | None = None
    inline_limit_bytes: int = DEFAULT_INLINE_LIMIT_BYTES
    secretsmanager: Any | None = None

    def offload(self, job: EmailJob) -> EmailJob:
        """``job`` with each attachment larger than ``inline_limit_bytes`` uploaded (once) and referenced."""
        if not any(self._too_big(a) for a in job.attachments):
            return job
        attachments = tuple(self._upload(job.dedupe_key, a) if self._too_big(a) else a for a in job.attachments)
        return dataclasses.replace(job, attachments=attachments)

    def object_key(self, dedupe_key: str, content: bytes) -> str:
        key_id = ledger_key(dedupe_key, self.key_secret_arn, self.secretsmanager)
        if self.key_secret_arn is None:
            key_id = "sha256-" + hashlib.sha256(dedupe_key.encode("utf-8")).hexdigest()
        return f"{KEY_PREFIX}{key_id}/{hashlib.sha256(content).hexdigest()}"

    def _too_big(self, attachment: Attachment) -> bool:
        return attachment.content is not None and len(attachment.content) > self.inline_limit_bytes

    def _upload(self, dedupe_key: str, attachment: Attachment) -> Attachment:
        assert attachment.content is not None
        key = self.object_key(dedupe_key, attachment.content)
        self._put_once(key, attachment)
        return Attachment.from_s3(self.bucket, key, attachment.file_name, attachment.content_type,
                                  content_id=attachment.content_id)

    def _put_once(self, key: str, attachment: Attachment) -> None:
        """Put the object unless one has the key (S3's conditional write): the content's hash is in the key, so the
        object there is this file. Needs PutObject only (``grant_attach``): a HeadObject would need read access, and
        without ListBucket S3 answers it 403 for a missing key."""
        from botocore.exceptions import ClientError

        try:
            self._client().put_object(Bucket=self.bucket, Key=key, Body=attachment.content,
                                      ContentType=attachment.content_type, IfNoneMatch="*")
        except ClientError as error:
            # 412: an object has the key already; 409: another put of it is under way (the same file, by its hash).
            if error.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise

    def _client(self) -> Any:
        if self.s3 is None:
            import boto3

            self.s3 = boto3.client("s3")
        return self.s3
