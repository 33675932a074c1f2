"""Builds the demo's report from what the emulator's SES accepted, the ledger and the DLQ, never from the consumer's
own counters."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

import boto3

from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import DEDUPE_KEY, DeadLetter, Ledger, ReasonCode

from ..emulator.server import subject_of
from .report import UNKNOWN, Report, Residual, ResidualReport
from .scenarios.fault_burst import FaultBurstReport
from .scenarios.load import BurstReport
from .workload import Workload, keys_by_emails, keys_sent_twice


def build_report(
    sent_emails: list[Any],
    workload: Workload,
    policy: str,
    table_name: str,
    dead_letter_queue_url: str,
    runner_stats: dict[str, int],
    notes: list[str],
    residual: Residual | None = None,
    burst: BurstReport | None = None,
    fault_bursts: list[FaultBurstReport] | None = None,
) -> Report:
    subjects = [subject_of(message) for message in sent_emails]
    per_key = workload.emails_per_key(subjects)
    expected = {*workload.subject_to_key, *(residual.workload.subject_to_key if residual else ()),
                *(burst.subjects if burst else ()), *(s for f in fault_bursts or () for s in f.subjects)}
    unexpected = sum(1 for subject in subjects if subject not in expected)
    records = ledger_records(table_name, list(per_key))
    statuses = {key: record.status for key, record in records.items()}
    dead, samples, copies, dead_keys = _dead_letters(dead_letter_queue_url)
    lost = {key: "DLQ" if key in dead_keys else statuses.get(key, "absent")
            for key, count in per_key.items() if count == 0}
    missing_refusals = sorted(workload.refused_keys - dead_keys)
    refusal_statuses = {k: record.status for k, record in ledger_records(table_name, missing_refusals).items()}
    return Report(
        policy=policy,
        jobs_enqueued=workload.jobs,
        distinct_keys=len(per_key),
        deliveries_to_handler=runner_stats.get("records_delivered", 0),
        invocations=runner_stats.get("invocations", 0),
        workers_killed=runner_stats.get("workers_killed", 0),
        emails_per_key=keys_by_emails(per_key),
        keys_sent_twice=keys_sent_twice(per_key),
        keys_lost=dict(sorted(lost.items())),
        keys_sent_once_recorded_unknown=sum(1 for k, c in per_key.items() if c == 1 and statuses.get(k) == UNKNOWN),
        unexpected_emails=unexpected,
        dead_letters=dict(sorted(dead.items())),
        dead_letter_samples=samples,
        dead_letter_copies=copies,
        expected_dead_letters=workload.expected_dead_letters,
        refused_keys_not_dead_lettered={k: refusal_statuses.get(k, "absent") for k in missing_refusals},
        runner=runner_stats,
        emulator_notes=notes,
        unknown_records=sum(1 for status in statuses.values() if status == UNKNOWN),
        confirmed_by_ses=sum(1 for record in records.values() if record.ses_message_ids),
        delivery_outcomes=_delivery_outcomes(records.values()),
        confirmation_ms=_confirmation_ms(records.values()),
        confirmation_waits_ms=_confirmation_waits_ms(records.values()),
        residual=_residual(residual, sent_emails, table_name) if residual else None,
        burst=burst,
        fault_bursts=list(fault_bursts or ()),
    )


def _residual(residual: Residual, sent_emails: list[Any], table_name: str) -> ResidualReport:
    ids_per_key: dict[str, list[str]] = {key: [] for key in residual.workload.subject_to_key.values()}
    for message in sent_emails:
        key = residual.workload.subject_to_key.get(subject_of(message))
        if key is not None:
            ids_per_key[key].append(str(message.id))
    records = ledger_records(table_name, list(ids_per_key))
    twice = sorted(key for key, ids in ids_per_key.items() if len(ids) >= 2)
    return ResidualReport(
        keys=len(ids_per_key),
        sent_twice=twice,
        detected=sorted(k for k, record in records.items() if record.double_send),
        outside_the_window=[k for k in twice if ids_per_key[k][0] not in residual.send_events_dropped],
        lost=sorted(key for key, ids in ids_per_key.items() if not ids),
        send_events_dropped=len(residual.send_events_dropped),
    )


def _delivery_outcomes(records: Iterable[EmailRecord]) -> dict[str, int]:
    outcomes: Counter[str] = Counter()
    for record in records:
        outcomes.update(f"{what} ({detail})" if detail else what for what, _, detail in record.outcomes)
    return dict(sorted(outcomes.items()))


def _confirmation_waits_ms(records: Iterable[EmailRecord]) -> list[int]:
    return sorted(r.evidence_at_ms - r.ses_accepted_at_ms for r in records
                  if r.evidence_at_ms is not None and r.ses_accepted_at_ms is not None)


def _confirmation_ms(records: Iterable[EmailRecord]) -> dict[str, int]:
    waits = _confirmation_waits_ms(records)
    if not waits:
        return {}
    return {"p50": waits[len(waits) // 2], "p90": waits[int(len(waits) * 0.9)], "max": waits[-1]}


def ledger_records(table_name: str, keys: list[str]) -> dict[str, EmailRecord]:
    """The ledger records of ``keys``, read as the operator command reads them."""
    dynamodb: Any = boto3.client("dynamodb")
    records: dict[str, EmailRecord] = {}
    for start in range(0, len(keys), 100):
        request = {table_name: {"Keys": [{Ledger.KEY: {"S": k}} for k in keys[start : start + 100]]}}
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table_name, []):
                record = EmailRecord.from_item(item)
                records[record.key] = record
            request = response.get("UnprocessedKeys") or {}
    return records


def _dead_letters(queue_url: str) -> tuple[Counter[str], dict[str, str], int, set[str]]:
    """Each dead-lettered job's reason, counted once per job: per dedupe key, or per source message when it has no
    readable key (read and left invisible, so none is read twice). A job can be there more than once: a killed
    batch dead-letters a message again on its redelivery, and a job whose delayed copy was sent just before its
    worker was killed exists twice until both are refused; the extra ones are counted as copies."""
    sqs: Any = boto3.client("sqs")
    reasons: Counter[str] = Counter()
    samples: dict[str, str] = {}
    seen: set[str] = set()
    keys: set[str] = set()
    copies = 0
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                       VisibilityTimeout=900).get("Messages", [])
        if not messages:
            return reasons, samples, copies, keys
        for message in messages:
            attributes = message.get("MessageAttributes", {})
            source = attributes.get(DeadLetter.SOURCE_MESSAGE_ID, {}).get("StringValue", message["MessageId"])
            key = attributes.get(DeadLetter.DEDUPE_KEY, {}).get("StringValue") or _key_in(message["Body"])
            job = key or source
            if job in seen:
                copies += 1
                continue
            seen.add(job)
            keys.add(key)
            code = attributes.get(DeadLetter.REASON_CODE, {}).get("StringValue", ReasonCode.REDRIVEN_BY_SQS.value)
            reasons[code] += 1
            samples.setdefault(code, attributes.get(DeadLetter.REASON, {}).get("StringValue", "no reason attached"))


def _key_in(body: str) -> str:
    """The dedupe key of a job SQS moved to the DLQ by itself (it carries no sendonce attributes)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    return str(document.get(DEDUPE_KEY, "")) if isinstance(document, dict) else ""
