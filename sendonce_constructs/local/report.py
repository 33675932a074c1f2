"""The exactly-once report, built from what the emulator's SES accepted, not from the consumer's own counters."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import boto3

from .workload import Workload


@dataclass
class Report:
    policy: str
    jobs_enqueued: int
    distinct_keys: int
    deliveries_to_handler: int
    invocations: int
    workers_killed: int
    emails_per_key: dict[int, int]  # emails sent -> how many keys got that many
    keys_sent_twice: list[str]
    keys_lost: dict[str, str]  # key -> its ledger status (UNKNOWN: the loss is recorded), or DLQ if its job is there
    keys_sent_once_recorded_unknown: int
    unexpected_emails: int
    dead_letters: dict[str, int]  # reason code -> distinct source messages
    dead_letter_samples: dict[str, str]
    dead_letter_copies: int  # extra copies of a message already there (a killed batch dead-lettered it twice)
    expected_dead_letters: int
    refused_keys_not_dead_lettered: dict[str, str]  # key -> ledger status; UNKNOWN if its worker died mid-send
    runner: dict[str, int] = field(default_factory=dict)
    emulator_notes: list[str] = field(default_factory=list)

    @property
    def lost_without_record(self) -> list[str]:
        return sorted(k for k, status in self.keys_lost.items() if status not in ("UNKNOWN", "DLQ"))

    @property
    def poison_lost(self) -> bool:
        """A bad or refused job that is neither in the DLQ nor recorded UNKNOWN (killed mid-send) was lost."""
        unrecorded_refusals = any(s != "UNKNOWN" for s in self.refused_keys_not_dead_lettered.values())
        dead_lettered = sum(self.dead_letters.values()) + len(self.refused_keys_not_dead_lettered)
        return unrecorded_refusals or dead_lettered < self.expected_dead_letters

    @property
    def ok(self) -> bool:
        doubled = bool(self.keys_sent_twice) and self.policy == "at-most-once"
        return not doubled and not self.lost_without_record and not self.poison_lost and not self.unexpected_emails

    @property
    def verdict(self) -> str:
        sent_once = self.emails_per_key.get(1, 0)
        if not self.ok:
            problems = []
            if self.keys_sent_twice:
                problems.append(f"{len(self.keys_sent_twice)} keys sent twice")
            if self.lost_without_record:
                problems.append(f"{len(self.lost_without_record)} keys lost without a record")
            if self.poison_lost:
                problems.append("bad or refused jobs missing from the DLQ without a record")
            if self.unexpected_emails:
                problems.append(f"{self.unexpected_emails} emails nobody asked for")
            return "FAIL: " + "; ".join(problems)
        return (
            f"PASS: {sent_once} of {self.distinct_keys} keys sent exactly once; "
            f"{sum(1 for s in self.keys_lost.values() if s == 'UNKNOWN')} lost in the documented crash window "
            f"(each recorded UNKNOWN); {sum(1 for s in self.keys_lost.values() if s == 'DLQ')} waiting in the DLQ; "
            f"{len(self.keys_sent_twice)} sent twice; {sum(self.dead_letters.values())} poison messages in the DLQ"
        )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(ok=self.ok, verdict=self.verdict, lost_without_record=self.lost_without_record)
        return data


def build_report(
    sent_emails: list[Any],
    workload: Workload,
    policy: str,
    table_name: str,
    dead_letter_queue_url: str,
    runner_stats: dict[str, int],
    notes: list[str],
) -> Report:
    per_key: Counter[str] = Counter({key: 0 for key in workload.subject_to_key.values()})
    unexpected = 0
    for message in sent_emails:
        key = workload.subject_to_key.get(getattr(message, "subject", ""))
        if key is None:
            unexpected += 1
        else:
            per_key[key] += 1
    statuses = _ledger_statuses(table_name, list(per_key))
    dead, samples, copies, dead_keys = _dead_letters(dead_letter_queue_url)
    lost = {key: "DLQ" if key in dead_keys else statuses.get(key, "absent")
            for key, count in per_key.items() if count == 0}
    missing_refusals = sorted(workload.refused_keys - dead_keys)
    refusal_statuses = _ledger_statuses(table_name, missing_refusals)
    return Report(
        policy=policy,
        jobs_enqueued=workload.jobs,
        distinct_keys=len(per_key),
        deliveries_to_handler=runner_stats.get("records_delivered", 0),
        invocations=runner_stats.get("invocations", 0),
        workers_killed=runner_stats.get("workers_killed", 0),
        emails_per_key=dict(sorted(Counter(per_key.values()).items())),
        keys_sent_twice=sorted(k for k, c in per_key.items() if c >= 2),
        keys_lost=dict(sorted(lost.items())),
        keys_sent_once_recorded_unknown=sum(1 for k, c in per_key.items() if c == 1 and statuses.get(k) == "UNKNOWN"),
        unexpected_emails=unexpected,
        dead_letters=dict(sorted(dead.items())),
        dead_letter_samples=samples,
        dead_letter_copies=copies,
        expected_dead_letters=workload.expected_dead_letters,
        refused_keys_not_dead_lettered={k: refusal_statuses.get(k, "absent") for k in missing_refusals},
        runner=runner_stats,
        emulator_notes=notes,
    )


def _ledger_statuses(table_name: str, keys: list[str]) -> dict[str, str]:
    dynamodb = boto3.client("dynamodb")
    statuses = {}
    for start in range(0, len(keys), 100):
        request = {table_name: {"Keys": [{"dedupeKey": {"S": k}} for k in keys[start : start + 100]],
                                "ProjectionExpression": "dedupeKey, #s", "ExpressionAttributeNames": {"#s": "status"}}}
        while request:
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response["Responses"].get(table_name, []):
                statuses[item["dedupeKey"]["S"]] = item["status"]["S"]
            request = response.get("UnprocessedKeys") or {}
    return statuses


def _dead_letters(queue_url: str) -> tuple[Counter[str], dict[str, str], int, set[str]]:
    """Each DLQ message's reason, counted once per source message (read and left invisible, so none twice)."""
    sqs = boto3.client("sqs")
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
            source = attributes.get("sendonce.sourceMessageId", {}).get("StringValue", message["MessageId"])
            if source in seen:
                copies += 1
                continue
            seen.add(source)
            keys.add(attributes.get("sendonce.dedupeKey", {}).get("StringValue") or _key_in(message["Body"]))
            code = attributes.get("sendonce.reasonCode", {}).get("StringValue", "redrive: maxReceiveCount reached")
            reasons[code] += 1
            samples.setdefault(code, attributes.get("sendonce.reason", {}).get("StringValue", "no reason attached"))


def _key_in(body: str) -> str:
    """The dedupe key of a job SQS moved to the DLQ by itself (it carries no sendonce attributes)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    return str(document.get("dedupeKey", "")) if isinstance(document, dict) else ""


def render_text(report: Report) -> str:
    width = max(report.emails_per_key.values(), default=1)
    histogram = "\n".join(
        f"    {emails} email{'s' if emails != 1 else ' '}: {count:5d} keys  {'#' * max(1, round(40 * count / width))}"
        for emails, count in report.emails_per_key.items()
    )
    dlq = "\n".join(f"    {code}: {count}   e.g. {report.dead_letter_samples[code][:90]}"
                    for code, count in report.dead_letters.items()) or "    (empty)"
    lost = "\n".join(
        f"    {key}: " + ("its job is in the DLQ (maxReceiveCount reached)" if status == "DLQ" else
                       f"ledger says {status}")
        for key, status in report.keys_lost.items()
    ) or "    none"
    return "\n".join([
        "",
        f"sendonce exactly-once report (policy {report.policy}; counted from the emails the emulator's SES accepted)",
        f"  jobs enqueued:            {report.jobs_enqueued}",
        f"  distinct keys to send:    {report.distinct_keys}",
        f"  deliveries to the handler:{report.deliveries_to_handler:5d} in {report.invocations} invocations "
        f"({report.workers_killed} workers killed mid-batch)",
        "  emails per key:",
        histogram,
        f"  keys sent twice:          {len(report.keys_sent_twice)} {report.keys_sent_twice[:5] or ''}",
        f"  keys lost:                {len(report.keys_lost)}",
        lost,
        f"  sent once, recorded UNKNOWN (died after SES accepted): {report.keys_sent_once_recorded_unknown}",
        f"  dead-letter queue ({sum(report.dead_letters.values())} messages, {report.expected_dead_letters} expected, "
        f"{report.dead_letter_copies} duplicate copies):",
        dlq,
        *(f"    refused job not in the DLQ: {k}: ledger says {status} (its worker was killed mid-send)"
          for k, status in report.refused_keys_not_dead_lettered.items()),
        "",
        report.verdict,
    ])


def write_outputs(report: Report, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    json_path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")
    return [json_path, _chart(report, out_dir / "report.png")]


def _chart(report: Report, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    emails = list(report.emails_per_key)
    left.bar([str(e) for e in emails], [report.emails_per_key[e] for e in emails],
             color=["#c0392b" if e != 1 else "#27ae60" for e in emails])
    left.set_title("emails per key (from SES)")
    left.set_xlabel("emails sent")
    left.set_ylabel("keys")
    outcomes = {
        "sent once": report.emails_per_key.get(1, 0),
        "lost, UNKNOWN": len(report.keys_lost) - len(report.lost_without_record),
        "lost, unrecorded": len(report.lost_without_record),
        "sent twice": len(report.keys_sent_twice),
        **{f"DLQ: {code[:18]}": count for code, count in report.dead_letters.items()},
    }
    right.barh(list(outcomes), list(outcomes.values()), color="#2c3e50")
    right.set_title("outcomes")
    right.invert_yaxis()
    figure.suptitle(report.verdict.split(":")[0] + f" ({report.policy})", fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path
