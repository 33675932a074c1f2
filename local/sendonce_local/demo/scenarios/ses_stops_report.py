"""What the SES-stops phase found (``demo.scenarios.ses_stops``), and its verdict: every key once, none in either
lane's DLQ, no one-time code sent late, the quiet tenant unhindered, and each stop's backlog moving soon after SES
sends again."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sendonce_contract.waiting_room import WATCH_EVERY_S

from ..phase import PhaseReport
from .flood import FLOOD_FACTOR, WAIT_AIM, percentile

SUBJECT_PREFIX = "SES stops phase: "
WAIT_SLACK_S = 1.0  # the quiet tenant's p95 may also be within this much of alone
# A stop's backlog moves on the schedule watch's first run after SES sends again (each minute): the verdict allows
# two, for a loaded machine; delayed copies took up to 15 minutes.
MOVING_AIM_S = 2 * WATCH_EVERY_S
CODE_LIFETIME_S = 5.0  # a one-time code's expiresAt, from its enqueueing: well inside a stop and a parked job's wait


@dataclass
class SesStopsReport(PhaseReport):
    rate: float
    pause_s: float
    flood_jobs: int
    arrivals: int
    flood_tenant: str
    quiet_tenant: str
    emails_per_key: dict[int, int]
    keys_sent_twice: list[str]
    keys_lost: list[str]
    dead_letters: int  # both lanes' DLQs, what the phase added
    waits_s: dict[str, list[float]]  # the quiet tenant's times to SES: "alone" and "tenant_stopped"
    ses_requests: int  # SendEmail requests the emulator answered during the phase, refusals included
    sends: int  # emails it accepted
    resumed_s: float  # from the account's pause ending until every job was sent
    # From each stop's end until its backlog's first email: the schedule watch's next run, and the lane's first send.
    moving_after_s: dict[str, float] = field(default_factory=dict)
    codes: int = 0
    codes_sent: int = 0  # emails SES accepted for the codes: each one late, so none may be sent
    codes_expired: int = 0  # codes whose key the ledger recorded EXPIRED
    drained: bool = True

    @property
    def codes_held(self) -> bool:
        return self.codes_sent == 0 and self.codes_expired == self.codes

    @property
    def quiet_wait_held(self) -> bool:
        alone, stopped = self.p("alone"), self.p("tenant_stopped")
        return stopped <= max(WAIT_AIM * alone, alone + WAIT_SLACK_S)

    @property
    def moved_in_time(self) -> bool:
        return all(0 <= after_s <= MOVING_AIM_S for after_s in self.moving_after_s.values())

    @property
    def ok(self) -> bool:
        return (self.drained and not self.keys_sent_twice and not self.keys_lost and self.dead_letters == 0
                and self.quiet_wait_held and self.codes_held and self.moved_in_time)

    def p(self, run: str, q: float = 0.95) -> float:
        return percentile(self.waits_s.get(run, []), q)

    def failure(self) -> str:
        found = [f"{len(self.keys_sent_twice)} keys sent twice" if self.keys_sent_twice else "",
                 f"{len(self.keys_lost)} keys not sent" if self.keys_lost else "",
                 f"{self.dead_letters} jobs in the DLQs" if self.dead_letters else "",
                 "" if self.drained else "not drained within its bound",
                 "" if self.moved_in_time else f"a backlog not moving within {MOVING_AIM_S} s: {self.moving_after_s}",
                 "" if self.codes_held else (f"of {self.codes} one-time codes past their expiry, {self.codes_sent} "
                                             f"sent late and {self.codes_expired} recorded EXPIRED"),
                 "" if self.quiet_wait_held else (
                     f"tenant {self.quiet_tenant}'s p95 time to SES {self.p('tenant_stopped'):.2f} s while "
                     f"{self.flood_tenant} was stopped, against {self.p('alone'):.2f} s alone")]
        return "SES stops: " + ", ".join(problem for problem in found if problem)

    def summary(self) -> str:
        return (f"SES stops: {sum(self.emails_per_key.values())} keys each once through a tenant's and the "
                f"account's stop, none in the DLQs, tenant {self.quiet_tenant} unhindered; {self.codes} one-time codes "
                "expired behind the stop, none sent late")

    def as_dict(self) -> dict[str, Any]:
        data = {**asdict(self), "ok": self.ok}
        data["waits_s"] = {run: [round(s, 3) for s in waits] for run, waits in self.waits_s.items()}
        return data

    def lines(self) -> list[str]:
        return [
            f"  SES stops: tenant {self.flood_tenant}'s sending disabled for {self.pause_s:g} s while its "
            f"{self.flood_jobs} bulk jobs arrive at {FLOOD_FACTOR} x SES's {self.rate:g} emails/s and {self.arrivals} "
            f"of tenant {self.quiet_tenant}'s arrive; then the account's sending paused for {self.pause_s:g} s while "
            f"{self.arrivals} urgent jobs and {self.arrivals} more of {self.quiet_tenant}'s arrive; SQS's and "
            "EventBridge's own timings",
            f"    emails per key: {self.emails_per_key}; sent twice {len(self.keys_sent_twice)}; lost "
            f"{len(self.keys_lost)}; in the DLQs {self.dead_letters}; the last job sent {self.resumed_s:.0f} s after "
            "the account's pause ended",
            "    the parked backlog started moving " + "; ".join(
                f"{after_s:.0f} s after {stop} sent again" for stop, after_s in self.moving_after_s.items())
            + " (the schedule watch runs every minute)",
            f"    tenant {self.quiet_tenant}'s time to SES while {self.flood_tenant} was stopped: p50 "
            f"{self.p('tenant_stopped', 0.5):.2f} s, p95 {self.p('tenant_stopped'):.2f} s; alone p50 "
            f"{self.p('alone', 0.5):.2f} s, p95 {self.p('alone'):.2f} s (held to at most {WAIT_AIM:g}x alone, or "
            f"{WAIT_SLACK_S:g} s more)",
            f"    one-time codes enqueued as the pause began, each valid {CODE_LIFETIME_S:g} s: {self.codes}; sent by "
            f"SES {self.codes_sent}; recorded EXPIRED {self.codes_expired} (stale, so not sent)",
            f"    SES asked {self.ses_requests} times for {self.sends} emails: {self.ses_requests - self.sends} "
            "refusals (each lane learning each stop once, then asking once a minute, and SES's rate throttling the "
            "flood once it could send)",
        ]
