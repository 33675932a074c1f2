"""Claim checks: a job's large attachments uploaded to the pipeline's attachments bucket and referenced, so the
job body (copied into every delayed copy, DLQ message and redrive) stays small.

An object's key is ``attachments/<key id>/<SHA-256 of the content>``: the key id is the dedupe key's digest (its
keyed digest, as the ledger knows it, under the pipeline's key privacy, so the bucket never shows a private key;
else its plain SHA-256), so a retried producer finds its object and writes it once (a HeadObject first). The
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

# Files larger than this go to the bucket when one is given; smaller ones travel in the job. A job body's
# SQS limit is 256 KiB by default (1 MiB at most), which a few inline files must share with the text.
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
        client = self._client()
        if not self._exists(client, key):
            client.put_object(Bucket=self.bucket, Key=key, Body=attachment.content,
                              ContentType=attachment.content_type)
        return Attachment.from_s3(self.bucket, key, attachment.file_name, attachment.content_type,
                                  content_id=attachment.content_id)

    def _exists(self, client: Any, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)) == 404:
                return False
            raise
        return True  # the content's hash is in the key: the object there is this file

    def _client(self) -> Any:
        if self.s3 is None:
            import boto3

            self.s3 = boto3.client("s3")
        return self.s3
