"""The demo's attachments and headers phase: receipts with their invoice PDF (small ones in the job body, large ones
uploaded by the producer's ``AttachmentStore`` to the deployed attachments bucket and sent as claim checks), one
with an inline logo the html shows as ``cid:``, password resets with ``X-Entity-Ref-ID`` and a notification with
one-click unsubscribe, sent by the deployed consumer with invocations killed before and after SES accepted.

What each email carried is read from the emulator's SES over HTTP (``ses_sends``): its attachments' names, types,
dispositions, content ids, sizes and SHA-256, and its headers, compared with what the producer sent."""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from sendonce_contract.headers import ENTITY_REF_ID, LIST_UNSUBSCRIBE_POST

from ...lambda_service.stack_runners import StackRunners
from ..phase import PhaseContext, PhaseReport

SUBJECT_PREFIXES = ("Invoice INV-", "Password reset request ", "Your order updates ")
INLINE_PDF_BYTES = 24 * 1024  # below the producer's inline limit: it travels in the job body
S3_PDF_BYTES = 300 * 1024  # above it: uploaded to the bucket, the job names it
BOUND_S = 240
UNSUBSCRIBE_URL = "https://shop.example.com/unsubscribe/{user}"


@dataclass(frozen=True)
class ExpectedEmail:
    """What SES must have received for one key: its attachments as SESv2 takes them, and its headers."""

    key: str
    attachments: tuple[tuple[Any, ...], ...]  # (fileName, contentType, disposition, contentId, size, sha256)
    headers: tuple[tuple[str, str], ...]


def attachment_row(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """An attachment as the emulator's log shows it (SES's upper-case disposition), comparable."""
    return (entry["fileName"], entry["contentType"], str(entry["disposition"] or "ATTACHMENT").upper(),
            entry["contentId"], entry["size"], entry["sha256"])


def check_sends(expected: Mapping[str, ExpectedEmail], sends: Iterable[Mapping[str, Any]]
                ) -> tuple[Counter[str], list[str]]:
    """Emails per key, and each difference between what SES received and what the producer sent (missing,
    doubled, an attachment or a header missing, extra or different), counted from the emulator's log of sends."""
    per_key: Counter[str] = Counter({email.key: 0 for email in expected.values()})
    problems: list[str] = []
    for send in sends:
        email = expected.get(str(send.get("subject", "")))
        if email is None:
            continue
        per_key[email.key] += 1
        got = sorted(attachment_row(a) for a in send.get("attachments", []))
        want = sorted(email.attachments)
        if got != want:
            missing = [row[0] for row in want if row not in got]
            extra = [row[0] for row in got if row not in want]
            problems.append(f"{email.key}: attachments differ (missing or different {missing}, unexpected {extra})")
        headers = sorted((str(name), str(value)) for name, value in send.get("headers", []))
        if headers != sorted(email.headers):
            problems.append(f"{email.key}: headers {headers} instead of {sorted(email.headers)}")
    problems += [f"{key}: sent {count} times" for key, count in sorted(per_key.items()) if count != 1]
    return per_key, problems


@dataclass
class AttachmentsReport(PhaseReport):
    """What the phase sent and what the emulator's SES received for it."""

    emails: int
    inline_receipts: int
    s3_receipts: int
    inline_images: int
    entity_ref_resets: int
    unsubscribe_notifications: int
    inline_body_bytes: int  # the largest job body carrying its PDF inline
    s3_body_bytes: int  # the largest job body naming its PDF in the bucket
    bucket: str
    files_uploaded: int  # distinct S3 files the producer offloaded (each enqueued twice: a producer retry)
    objects_in_bucket: int
    consumers_killed: int
    emails_per_key: dict[int, int]
    attachments_checked: int
    problems: list[str] = field(default_factory=list)
    drain_s: float = 0.0

    @property
    def ok(self) -> bool:
        return (not self.problems and self.emails_per_key == {1: self.emails}
                and self.objects_in_bucket == self.files_uploaded)

    def lines(self) -> list[str]:
        verdict = "PASS" if self.ok else "FAIL: " + "; ".join(self.problems[:3] or ["objects in the bucket"])
        return [
            f"  attachments and headers: {self.emails} emails: {self.inline_receipts} receipts with the invoice PDF "
            f"in the job ({INLINE_PDF_BYTES // 1024} KB), {self.s3_receipts} through the attachments bucket "
            f"({S3_PDF_BYTES // 1024} KB), {self.inline_images} with an inline logo (cid:), "
            f"{self.entity_ref_resets} password resets with X-Entity-Ref-ID, {self.unsubscribe_notifications} "
            "notification with one-click unsubscribe",
            f"    job bodies: at most {self.inline_body_bytes / 1024:.1f} KB with the PDF inline, "
            f"{self.s3_body_bytes / 1024:.1f} KB with a claim check; each claim-checked receipt enqueued twice (a "
            f"producer retry): {self.objects_in_bucket} objects in {self.bucket} for {self.files_uploaded} files; "
            f"{self.consumers_killed} consumer invocations killed before or after SES accepted",
            f"    from SES (the emulator's log of sends, over HTTP): emails per key {self.emails_per_key}; "
            f"{self.attachments_checked} attachments each with its name, type, disposition, content id, size and "
            f"SHA-256 as the producer sent it, and every email's headers exact; drained in {self.drain_s:.1f} s "
            f"-> {verdict}",
        ]

    def failure(self) -> str:
        return "attachments and headers: " + self.lines()[-1].split("-> ")[-1]

    def summary(self) -> str:
        return (f"{self.emails} emails each once with exactly its attachments ({self.attachments_checked} checked) "
                "and headers")


def is_phase_email(sent: Any) -> bool:
    return str(getattr(sent, "subject", "")).startswith(SUBJECT_PREFIXES)


def _jobs(seed: int, bucket: str) -> tuple[list[Any], dict[str, ExpectedEmail], list[Any]]:
    """The phase's jobs (claim-checked receipts last, so the retry list names them), and what SES must receive."""
    from sendonce_producer import Attachment, EmailJob, entity_ref_id, one_click_unsubscribe

    from ..documents import invoice_pdf, logo_png

    sender = "Shop <receipts@example.com>"
    jobs: list[Any] = []
    retried: list[Any] = []
    logo = Attachment.from_bytes(logo_png(), "logo.png", content_id="logo")
    for n in range(6):
        number, user = f"{seed}{n:03d}", f"buyer{n}"
        large = n >= 3
        pdf = invoice_pdf(number, S3_PDF_BYTES if large else INLINE_PDF_BYTES, seed * 100 + n)
        files = [Attachment.from_bytes(pdf, f"invoice-{number}.pdf")] + ([logo] if n == 0 else [])
        html = "<p>Thanks for your order: your invoice is attached.</p>" + (
            '<img src="cid:logo" alt="Shop">' if n == 0 else "")
        job = EmailJob(dedupe_key=f"receipt:INV-{number}:{user}", sender=sender, to=[f"{user}@example.org"],
                       subject=f"Invoice INV-{number}", html=html, attachments=files)
        (retried if large else jobs).append(job)
    for n in range(3):
        reference = f"reset-{seed}-{n}"
        jobs.append(EmailJob(dedupe_key=f"password-reset:{reference}:user{n}", sender=sender,
                             to=[f"user{n}@example.org"], subject=f"Password reset request {reference}",
                             text="Someone asked to reset your password.", headers=entity_ref_id(reference)))
    jobs.append(EmailJob(dedupe_key=f"order-updates:{seed}:buyer9", sender=sender, to=["buyer9@example.org"],
                         subject=f"Your order updates {seed}", text="Your order shipped.",
                         headers=one_click_unsubscribe(UNSUBSCRIBE_URL.format(user="buyer9"))))
    jobs += retried
    expected = {str(job.subject): ExpectedEmail(
        job.dedupe_key,
        tuple(attachment_row({"fileName": a.file_name, "contentType": a.content_type, "disposition": a.disposition,
                              "contentId": a.content_id, "size": len(a.content or b""),
                              "sha256": hashlib.sha256(a.content or b"").hexdigest()}) for a in job.attachments),
        tuple(job.headers.items())) for job in jobs}
    return jobs, expected, retried


def attachments_phase(context: PhaseContext) -> AttachmentsReport | None:
    deployed, aws = context.deployed, context.aws
    report = run_attachments_phase(deployed.consumer, deployed.table, deployed.attachments_bucket, aws.environment,
                                   context.log, context.options.seed, aws.ses_sends, context.say,
                                   context.options.phase_fault_probability)
    for line in report.lines() if report is not None else []:
        context.say(line)
    return report


def run_attachments_phase(consumer: Any, table: str, bucket: str | None, environment: dict[str, str], log: IO[str],
                      seed: int, ses_sends: Callable[[], list[dict[str, Any]]],
                      say: Callable[[str], None], fault_probability: float) -> AttachmentsReport | None:
    """Enqueue the phase's jobs through the producer's ``Pipeline`` with the deployed attachments bucket, run the
    deployed consumer with faults until every key is sent and the queue is empty, then compare what SES received."""
    import boto3

    from sendonce_producer import Pipeline
    from sendonce_producer.enqueue import message_request

    from ...lambda_service.sqs_source import FaultPlan

    if bucket is None:
        say("      attachments and headers: the stack has no attachments bucket output; phase skipped")
        return None
    queue_url = consumer.source.queue_url
    pipeline = Pipeline(queue_url, table, attachments_bucket=bucket)
    store = pipeline.attachment_store
    assert store is not None
    jobs, expected, retried = _jobs(seed, bucket)
    bodies = {job.dedupe_key: len(message_request(store.offload(job), queue_url, None, None)["MessageBody"])
              for job in jobs}
    for job in jobs + retried:  # the claim-checked receipts twice: a producer retried after a timeout
        pipeline.enqueue(job)
    say(f"      attachments and headers: {len(jobs)} jobs enqueued through the producer's Pipeline with the "
        f"stack's attachments bucket {bucket} ({len(retried)} invoices above its inline limit uploaded, their jobs "
        "enqueued twice); consumer invocations killed before and after SES accepted")
    started = time.monotonic()
    faults = FaultPlan(fault_probability, seed, ("before_send", "after_send", "lost_answer"), forced=2)
    runners = StackRunners(environment, log, faults=lambda: faults).start([consumer], [])
    try:
        runner = runners.runner_of(consumer)
        bound, quiet = time.monotonic() + BOUND_S, 0
        while time.monotonic() < bound and quiet < 3:  # every key sent and the queue empty, three polls running
            sent = {str(s["subject"]) for s in ses_sends()}
            quiet = quiet + 1 if set(expected) <= sent and not any(runner.queue_depth().values()) else 0
            time.sleep(0.5)
        killed = int(runner.stats.as_dict().get("workers_killed", 0))
    finally:
        runners.stop()
    per_key, problems = check_sends(expected, ses_sends())
    objects = boto3.client("s3").list_objects_v2(Bucket=bucket).get("KeyCount", 0)
    files = {job.dedupe_key for job in retried}
    return AttachmentsReport(
        emails=len(expected), inline_receipts=sum(1 for j in jobs if j.attachments and j not in retried),
        s3_receipts=len(retried), inline_images=sum(1 for j in jobs for a in j.attachments if a.content_id),
        entity_ref_resets=sum(1 for j in jobs if ENTITY_REF_ID in j.headers),
        unsubscribe_notifications=sum(1 for j in jobs if LIST_UNSUBSCRIBE_POST in j.headers),
        inline_body_bytes=max(bodies[j.dedupe_key] for j in jobs if j.attachments and j not in retried),
        s3_body_bytes=max(bodies[j.dedupe_key] for j in retried), bucket=bucket, files_uploaded=len(files),
        objects_in_bucket=int(objects), consumers_killed=killed,
        emails_per_key=dict(sorted(Counter(per_key.values()).items())),
        attachments_checked=sum(len(e.attachments) for e in expected.values()), problems=problems,
        drain_s=time.monotonic() - started)
