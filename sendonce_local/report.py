"""The exactly-once report, built from what the emulator's SES accepted, not from the consumer's own counters."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import boto3

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.record import EmailRecord
from sendonce_contract.schema import DEDUPE_KEY, DeadLetter, Ledger, ReasonCode, Status

from .emulator import subject_of
from .fault_burst import FaultBurstReport
from .load import DRAIN_AIM, SENT_RATE_AIM, BurstReport
from .outcome_check import OutcomeEventsCheck
from .workload import Workload, keys_by_emails, keys_sent_twice

UNKNOWN = Status.UNKNOWN.value


@dataclass
class Residual:
    """The second phase: keys sent while some of SES's Send events were lost."""

    workload: Workload
    send_events_dropped: set[str]  # SES message ids whose Send event was never delivered


@dataclass
class ResidualReport:
    keys: int
    sent_twice: list[str]
    detected: list[str]  # doubles the recorder found (two SES message ids on the record)
    outside_the_window: list[str]  # doubles whose first email's Send event was not lost: must be none
    lost: list[str]
    send_events_dropped: int

    @property
    def exercised(self) -> bool:
        """Detection was tried: at least one key was sent twice inside the crash window (and so had to be found)."""
        return bool(self.sent_twice)

    @property
    def ok(self) -> bool:
        return (self.exercised and set(self.sent_twice) <= set(self.detected) and not self.outside_the_window
                and not self.lost)


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
    dead_letter_copies: int  # extra copies of a job already there (see _dead_letters)
    expected_dead_letters: int
    refused_keys_not_dead_lettered: dict[str, str]  # key -> ledger status; UNKNOWN if its worker died mid-send
    runner: dict[str, int] = field(default_factory=dict)
    emulator_notes: list[str] = field(default_factory=list)
    unknown_records: int = 0  # keys left UNKNOWN for a person
    confirmed_by_ses: int = 0  # keys SES's events confirmed
    delivery_outcomes: dict[str, int] = field(default_factory=dict)  # delivered, bounced (type/subtype), complained
    confirmation_ms: dict[str, int] = field(default_factory=dict)  # send to recorded evidence: p50, p90, max
    confirmation_waits_ms: list[int] = field(default_factory=list)  # each confirmed key's, sorted (the chart's)
    residual: ResidualReport | None = None
    burst: BurstReport | None = None
    fault_bursts: list[FaultBurstReport] = field(default_factory=list)  # bursts through DynamoDB and SQS trouble
    too_slow: str | None = None  # why this machine's timings mean little, when they do
    outcome_events: OutcomeEventsCheck | None = None  # what the subscribed app heard, against the ledger

    @property
    def aims_missed(self) -> list[str]:
        """Goals that are not guarantees (the burst's rate and drain time): missed ones are said, never hidden."""
        if self.burst is None or self.burst.aims_met:
            return []
        return [f"burst drained in {self.burst.drain_s / self.burst.ideal_drain_s:.2f}x the ideal (aim {DRAIN_AIM}x) "
                f"at {self.burst.sent_rate / self.burst.rate:.0%} of SES's rate (aim {SENT_RATE_AIM:.0%})"]

    @property
    def _never_resend(self) -> bool:
        return DeliveryPolicy(self.policy) is DeliveryPolicy.NEVER_RESEND

    @property
    def lost_without_record(self) -> list[str]:
        return sorted(k for k, status in self.keys_lost.items() if status not in (UNKNOWN, "DLQ"))

    @property
    def poison_lost(self) -> bool:
        """A bad or refused job that is neither in the DLQ nor recorded UNKNOWN (killed mid-send) was lost."""
        unrecorded_refusals = any(s != UNKNOWN for s in self.refused_keys_not_dead_lettered.values())
        dead_lettered = sum(self.dead_letters.values()) + len(self.refused_keys_not_dead_lettered)
        return unrecorded_refusals or dead_lettered < self.expected_dead_letters

    @property
    def ok(self) -> bool:
        """Nothing sent twice, nothing lost without a record; under the default policy nothing lost at all and
        nothing left UNKNOWN; in the residual phase, every double detected and inside the crash window."""
        if self.keys_sent_twice or self.lost_without_record or self.poison_lost or self.unexpected_emails:
            return False
        if not self._never_resend and (self.keys_lost or self.unknown_records):
            return False
        return ((self.residual is None or self.residual.ok) and (self.burst is None or self.burst.ok)
                and all(fault_burst.ok for fault_burst in self.fault_bursts)
                and (self.outcome_events is None or self.outcome_events.ok))

    @property
    def verdict(self) -> str:
        sent_once = self.emails_per_key.get(1, 0)
        if not self.ok:
            problems = []
            if self.keys_sent_twice:
                problems.append(f"{len(self.keys_sent_twice)} keys sent twice")
            if self.lost_without_record:
                problems.append(f"{len(self.lost_without_record)} keys lost without a record")
            if not self._never_resend and self.keys_lost:
                problems.append(f"{len(self.keys_lost)} keys not sent")
            if not self._never_resend and self.unknown_records:
                problems.append(f"{self.unknown_records} keys left UNKNOWN")
            if self.burst is not None and not self.burst.ok:
                problems.append("burst: " + self.burst.lines()[1].strip())
            problems.extend(f"{fault_burst.lines()[0].strip()}: {fault_burst.problems()}"
                            for fault_burst in self.fault_bursts if not fault_burst.ok)
            if self.residual is not None and not self.residual.ok:
                residual = self.residual
                problems.append("residual: detection not exercised (no key was sent twice inside the crash "
                                "window)" if not residual.exercised else
                                f"residual: {len(set(residual.sent_twice) - set(residual.detected))} doubles "
                                f"undetected, {len(residual.outside_the_window)} outside the crash window, "
                                f"{len(residual.lost)} lost")
            if self.poison_lost:
                problems.append("bad or refused jobs missing from the DLQ without a record")
            if self.outcome_events is not None and not self.outcome_events.ok:
                problems.append(self.outcome_events.line())
            if self.unexpected_emails:
                problems.append(f"{self.unexpected_emails} emails nobody asked for")
            note = (f" (this machine was too slow for the timings to mean anything: {self.too_slow})"
                    if self.too_slow else "")
            return "FAIL: " + "; ".join(problems) + note
        verdict = (
            f"PASS: {sent_once} of {self.distinct_keys} keys sent exactly once; "
            f"{self.unknown_records} UNKNOWN; {len(self.keys_sent_twice)} sent twice; "
            f"{sum(1 for s in self.keys_lost.values() if s == 'DLQ')} waiting in the DLQ; "
            f"{sum(self.dead_letters.values())} poison messages in the DLQ"
        )
        if self.residual is not None:
            doubles = len(self.residual.sent_twice)
            verdict += (f"; residual: {doubles} double{'s' if doubles != 1 else ''} with SES's Send events lost, "
                        f"{len(self.residual.detected)} detected")
        if self.burst is not None:
            verdict += (f"; burst: {self.burst.keys} keys at {self.burst.sent_rate / self.burst.rate:.0%} of SES's "
                        f"rate, drained in {self.burst.drain_s / self.burst.ideal_drain_s:.2f}x the ideal, "
                        f"{self.burst.dead_letters} in the DLQ")
        for fault_burst in self.fault_bursts:
            verdict += (f"; {fault_burst.keys} keys through {fault_burst.stretch.split(' (')[0]}: each once, "
                        f"none in the DLQ, queue peak {fault_burst.peak_depth / max(1, fault_burst.jobs):.2f}x the "
                        "jobs")
        if self.aims_missed:
            verdict += "; performance aims, not part of the guarantee, missed: " + "; ".join(self.aims_missed)
        if self.too_slow:
            verdict += f" (timings not meaningful: {self.too_slow})"
        return verdict

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.burst is not None:
            data["burst"] = self.burst.as_dict()
        data["fault_bursts"] = [fault_burst.as_dict() for fault_burst in self.fault_bursts]
        data.update(ok=self.ok, verdict=self.verdict, lost_without_record=self.lost_without_record,
                    aims_missed=self.aims_missed)
        return data


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
    records = _ledger_records(table_name, list(per_key))
    statuses = {key: record.status for key, record in records.items()}
    dead, samples, copies, dead_keys = _dead_letters(dead_letter_queue_url)
    lost = {key: "DLQ" if key in dead_keys else statuses.get(key, "absent")
            for key, count in per_key.items() if count == 0}
    missing_refusals = sorted(workload.refused_keys - dead_keys)
    refusal_statuses = {k: record.status for k, record in _ledger_records(table_name, missing_refusals).items()}
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
    records = _ledger_records(table_name, list(ids_per_key))
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


def _ledger_records(table_name: str, keys: list[str]) -> dict[str, EmailRecord]:
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
        f"  left UNKNOWN for a person: {report.unknown_records}",
        f"  confirmed by SES's events:  {report.confirmed_by_ses} keys; send to confirmation "
        + (", ".join(f"{k} {v} ms" for k, v in report.confirmation_ms.items()) or "-"),
        "  delivery outcomes of these keys (from SES's events): "
        + (", ".join(f"{k} {v}" for k, v in report.delivery_outcomes.items()) or "none recorded"),
        *([f"  {report.outcome_events.line()}"] if report.outcome_events is not None else []),
        f"  dead-letter queue ({sum(report.dead_letters.values())} messages, {report.expected_dead_letters} expected, "
        f"{report.dead_letter_copies} duplicate copies):",
        dlq,
        *(f"    refused job not in the DLQ: {k}: ledger says {status} (its worker was killed mid-send)"
          for k, status in report.refused_keys_not_dead_lettered.items()),
        *_render_residual(report.residual),
        *(report.burst.lines() if report.burst else []),
        *(line for fault_burst in report.fault_bursts for line in fault_burst.lines()),
        "",
        report.verdict,
    ])


def _render_residual(residual: ResidualReport | None) -> list[str]:
    if residual is None:
        return []
    return [
        f"  the residual ({residual.keys} keys, {residual.send_events_dropped} Send events lost, later events past "
        "the grace period):",
        f"    sent twice: {len(residual.sent_twice)}; detected by the recorder: {len(residual.detected)}; "
        f"doubled outside the crash window: {len(residual.outside_the_window)}; lost: {len(residual.lost)}",
    ]


def write_outputs(report: Report, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "report.json"
    json_path.write_text(json.dumps(report.as_dict(), indent=2, sort_keys=True) + "\n")
    return [json_path, _chart(report, out_dir / "report.png")]


PASS_COLOUR, FAIL_COLOUR, NEUTRAL_COLOUR, MUTED_COLOUR = "#27ae60", "#c0392b", "#2c3e50", "#95a5a6"


def _chart(report: Report, path: Path) -> Path:
    """Six panels, each a question a reader asks: did every key go once, where did the rest go, how fast did a
    burst drain, how soon did SES confirm, what became of the emails, and was a double caught."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 3, figsize=(14, 7.5), dpi=90)
    _emails_per_key(axes[0][0], report)
    _outcomes(axes[0][1], report)
    _residual_panel(axes[0][2], report.residual)
    _burst_panel(axes[1][0], report.burst)
    _confirmation_panel(axes[1][1], report.confirmation_waits_ms)
    _bars(axes[1][2], report.delivery_outcomes or {"none recorded": 0}, "delivery outcomes (SES's events)")
    figure.suptitle(f"{report.verdict.split(':')[0]} ({report.policy}): {report.distinct_keys} keys, "
                    f"{report.jobs_enqueued} jobs, {report.workers_killed} workers killed", fontsize=11)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def _bars(axis: Any, values: dict[str, int], title: str, colours: list[str] | None = None) -> None:
    """Horizontal bars with their counts written on them; a zero is written too, so an empty row reads as 0."""
    labels = list(values)
    bars = axis.barh(labels, [values[label] for label in labels], color=colours or NEUTRAL_COLOUR)
    axis.bar_label(bars, labels=[str(values[label]) for label in labels], padding=3)
    axis.set_title(title)
    axis.invert_yaxis()
    axis.set_xlim(0, max(1, *values.values()) * 1.15)


def _emails_per_key(axis: Any, report: Report) -> None:
    counts = {f"{emails} email{'s' if emails != 1 else ''}": report.emails_per_key.get(emails, 0)
              for emails in sorted({0, 1, 2, *report.emails_per_key})}
    colours = [PASS_COLOUR if label == "1 email" else FAIL_COLOUR if count else MUTED_COLOUR
               for label, count in counts.items()]
    _bars(axis, counts, "keys by emails SES accepted for them", colours)


def _outcomes(axis: Any, report: Report) -> None:
    outcomes = {
        "sent once": report.emails_per_key.get(1, 0),
        "sent twice": len(report.keys_sent_twice),
        "lost, recorded UNKNOWN": len(report.keys_lost) - len(report.lost_without_record),
        "lost, unrecorded": len(report.lost_without_record),
        **{f"DLQ: {code[:22]}": count for code, count in report.dead_letters.items()},
    }
    colours = [PASS_COLOUR if label == "sent once" else NEUTRAL_COLOUR if label.startswith("DLQ") else
               FAIL_COLOUR if count else MUTED_COLOUR for label, count in outcomes.items()]
    _bars(axis, outcomes, "what became of each key and bad job", colours)


def _residual_panel(axis: Any, residual: ResidualReport | None) -> None:
    if residual is None:
        axis.set_axis_off()
        return
    undetected = len(set(residual.sent_twice) - set(residual.detected))
    _bars(axis, {"Send events lost": residual.send_events_dropped, "sent twice": len(residual.sent_twice),
                 "detected by the recorder": len(residual.detected), "undetected": undetected,
                 "outside the crash window": len(residual.outside_the_window)},
          f"residual: {residual.keys} keys, SES's events lost",
          [NEUTRAL_COLOUR, NEUTRAL_COLOUR, PASS_COLOUR, FAIL_COLOUR if undetected else MUTED_COLOUR,
           FAIL_COLOUR if residual.outside_the_window else MUTED_COLOUR])


def _burst_panel(axis: Any, burst: BurstReport | None) -> None:
    if burst is None or not burst.accepted_s:
        axis.set_axis_off()
        return
    sent = list(range(1, len(burst.accepted_s) + 1))
    axis.step(burst.accepted_s, sent, where="post", color=NEUTRAL_COLOUR, label="emails SES accepted")
    first = burst.accepted_s[0]
    axis.plot([first, first + burst.ideal_drain_s], [0, burst.keys], linestyle="--", color=MUTED_COLOUR,
              label=f"SES's rate ({burst.rate:g}/s)")
    axis.axvline(burst.drain_s, color=PASS_COLOUR if burst.ok else FAIL_COLOUR, linestyle=":",
                 label=f"drained at {burst.drain_s:.0f} s ({burst.drain_s / burst.ideal_drain_s:.2f}x ideal)")
    axis.set_title(f"burst: {burst.keys} keys at once, {burst.sent_rate / burst.rate:.0%} of SES's rate")
    axis.set_xlabel("seconds since the burst was enqueued")
    axis.set_ylabel("emails")
    axis.legend(fontsize=8, loc="lower right")


def _confirmation_panel(axis: Any, waits_ms: list[int]) -> None:
    if not waits_ms:
        _bars(axis, {"no confirmation recorded": 0}, "SES accepted to its event recorded")
        return
    seconds = [wait / 1000 for wait in waits_ms]
    axis.hist(seconds, bins=min(30, max(5, len(seconds) // 5)), color=NEUTRAL_COLOUR)
    median = seconds[len(seconds) // 2]
    axis.axvline(median, color=PASS_COLOUR, linestyle=":", label=f"median {median:.1f} s")
    axis.set_title(f"SES accepted to its event recorded ({len(seconds)} keys)")
    axis.set_xlabel("seconds")
    axis.set_ylabel("keys")
    axis.legend(fontsize=8)
