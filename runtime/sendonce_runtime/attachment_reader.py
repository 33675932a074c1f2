"""Reads a job's s3 attachments (its claim checks) before the claim, so that a missing object is dead-lettered
and S3's trouble waited out with nothing claimed and nothing sent. Imported only by a consumer deployed with an
attachments bucket.

One GetObject per attachment, with the ledger's call timeouts and no SDK retry: a throttled, slow or failing S3
makes the job wait as a delayed copy (the redelivery's doubling wait), never a dead letter. The size S3 reports is
checked against SES's message before the body is read, so an object too large is never downloaded. The content
stays in memory for the send only: no log line, reason or record carries it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from sendonce_contract.attachments import AttachmentError, S3Location, check_message_size
from sendonce_contract.deploy_config import TimeBudget
from sendonce_contract.message import body_size

from .aws_errors import describe, error_code, status_code
from .checks import Delivery, Rest
from .outcome import Outcome, Redeliver, Verdict

# S3's answers that a later try may get past (its throttling is SlowDown, a 503).
S3_TROUBLE_CODES = frozenset({"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout",
                              "RequestTimeTooSkewed", "InternalError", "ServiceUnavailable", "ExpiredToken"})
S3_MISSING_CODES = frozenset({"NoSuchKey", "NoSuchBucket", "404", "NotFound"})


class ReadAttachments:
    """The check before the claim that reads every s3 attachment of the job into it."""

    def __init__(self, s3: Any, budget: TimeBudget) -> None:
        self._s3 = s3
        self._budget = budget

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        job = delivery.job
        if not job.s3_attachments:
            return rest(delivery)
        attachments = list(job.attachments)
        sizes = {i: len(a.content) for i, a in enumerate(attachments) if a.content is not None}
        for index, attachment in enumerate(attachments):
            if attachment.s3 is None:
                continue
            if delivery.deadline.remaining_ms() < self._budget.attachment_read_budget_ms:
                return Redeliver(delivery.result(Outcome.DEADLINE, "too little time left to read an attachment "
                                                 "and send"), retry_after_s=0)
            try:
                content = self._read(attachment.s3, lambda size, i=index: self._check_size(job, sizes, i, size))
            except AttachmentError as error:
                return delivery.refuse(Outcome.ATTACHMENT_TOO_LARGE, error.reason)
            except ClientError as error:
                return self._failed(delivery, attachment.file_name, attachment.s3, error)
            except BotoCoreError as error:
                return Redeliver(delivery.result(
                    Outcome.ATTACHMENT_UNAVAILABLE, f"reading attachment {attachment.file_name!r}: {describe(error)}"))
            if not content:
                return delivery.refuse(Outcome.ATTACHMENT_MISSING, f"attachment {attachment.file_name!r}: "
                                       f"s3://{attachment.s3.bucket}/{attachment.s3.key} is empty; nothing was sent")
            attachments[index] = attachment.with_content(content)
        return rest(delivery.with_job(job._replace(attachments=tuple(attachments))))

    def _read(self, location: S3Location, check_size: Any) -> bytes:
        response = self._s3.get_object(Bucket=location.bucket, Key=location.key)
        body = response["Body"]
        try:
            check_size(int(response.get("ContentLength", 0)))
            return bytes(body.read())
        finally:
            body.close()

    @staticmethod
    def _check_size(job: Any, sizes: dict[int, int], index: int, size: int) -> None:
        sizes[index] = size
        check_message_size(body_size(job.content), job.attachments, sizes)

    @staticmethod
    def _failed(delivery: Delivery, file_name: str, location: S3Location, error: ClientError) -> Verdict:
        code, status = error_code(error), status_code(error)
        where = f"attachment {file_name!r} (s3://{location.bucket}/{location.key})"
        if code in S3_MISSING_CODES or status == 404:
            return delivery.refuse(Outcome.ATTACHMENT_MISSING, f"{where} does not exist ({code}): it expired or "
                                   "was never put; nothing was sent")
        if code in S3_TROUBLE_CODES or status == 429 or status >= 500 or status == 0:
            return Redeliver(delivery.result(Outcome.ATTACHMENT_UNAVAILABLE, f"reading {where}: {describe(error)}"))
        return Redeliver(delivery.result(Outcome.ATTACHMENT_READ_FAILED, f"reading {where}: {describe(error)} "
                                         "(is the consumer granted read on the attachments bucket?)"))
