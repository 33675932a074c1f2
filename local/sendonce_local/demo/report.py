"""The exactly-once report, built from what the emulator's SES accepted, not from the consumer's own counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.schema import Status

from .phase import PhaseReport
from .scenarios.fault_burst import FaultBurstReport
from .scenarios.load import BurstReport
from .workload import Workload

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
    # Each phase of demo.phases.PHASES by name, in order: its report, or None when it was not in this run.
    phases: dict[str, PhaseReport | None] = field(default_factory=dict)

    @property
    def phase_reports(self) -> list[PhaseReport]:
        return [report for report in self.phases.values() if report is not None]

    @property
    def aims_missed(self) -> list[str]:
        """Goals that are not guarantees (the burst's rate and drain time, the flood's waits against alone): missed
        ones are said, never hidden."""
        return ([] if self.burst is None else self.burst.missed_aims()) + [
            aim for report in self.phase_reports for aim in report.missed_aims()]

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
                and all(report.ok for report in self.phase_reports))

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
            problems.extend(report.failure() for report in self.phase_reports if not report.ok)
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
                        f"rate, drained in {self.burst.drain_ratio:.2f}x the ideal, "
                        f"{self.burst.dead_letters} in the DLQ")
        for fault_burst in self.fault_bursts:
            verdict += (f"; {fault_burst.keys} keys through {fault_burst.stretch.split(' (')[0]}: each once, "
                        f"none in the DLQ, queue peak {fault_burst.peak_depth / max(1, fault_burst.jobs):.2f}x the "
                        "jobs")
        verdict += "".join(f"; {summary}" for report in self.phase_reports if (summary := report.summary()))
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
        del data["phases"]  # each phase under its own name
        data.update({name: None if report is None else report.as_dict() for name, report in self.phases.items()})
        data.update(ok=self.ok, verdict=self.verdict, lost_without_record=self.lost_without_record,
                    aims_missed=self.aims_missed)
        return data
