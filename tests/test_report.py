"""The demo report's verdict: which outcomes break the promise and which are the documented window."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from sendonce_local.demo.phases.attachments import AttachmentsReport, ExpectedEmail, attachment_row, check_sends
from sendonce_local.demo.report import Report, ResidualReport
from sendonce_local.demo.report_text import render_text

CLEAN = Report(
    policy="never-resend", jobs_enqueued=12, distinct_keys=10, deliveries_to_handler=14, invocations=3,
    workers_killed=1, emails_per_key={1: 10}, keys_sent_twice=[], keys_lost={}, keys_sent_once_recorded_unknown=0,
    unexpected_emails=0, dead_letters={"invalid-message": 2}, dead_letter_samples={"invalid-message": "bad"},
    dead_letter_copies=0, expected_dead_letters=2, refused_keys_not_dead_lettered={},
)


def test_every_key_once_passes():
    assert CLEAN.ok and CLEAN.verdict.startswith("PASS")


def test_a_loss_recorded_unknown_or_a_job_waiting_in_the_dlq_is_not_a_failure():
    for status in ("UNKNOWN", "DLQ"):
        report = replace(CLEAN, emails_per_key={0: 1, 1: 9}, keys_lost={"k": status})
        assert report.ok, status


def test_a_loss_without_a_record_fails():
    report = replace(CLEAN, emails_per_key={0: 1, 1: 9}, keys_lost={"k": "IN_FLIGHT"})
    assert not report.ok and "1 keys lost without a record" in report.verdict


def test_a_key_sent_twice_fails_under_either_policy():
    report = replace(CLEAN, emails_per_key={1: 9, 2: 1}, keys_sent_twice=["k"])
    assert not report.ok and "1 keys sent twice" in report.verdict
    assert not replace(report, policy="resend-without-evidence").ok


def test_the_default_policy_fails_on_any_key_not_sent_or_left_unknown():
    resend = replace(CLEAN, policy="resend-without-evidence")
    assert resend.ok
    for status in ("UNKNOWN", "DLQ"):
        report = replace(resend, emails_per_key={0: 1, 1: 9}, keys_lost={"k": status})
        assert not report.ok and "1 keys not sent" in report.verdict
    assert not replace(resend, unknown_records=1).ok


def test_the_residual_passes_only_when_every_double_is_detected_and_inside_the_crash_window():
    fine = ResidualReport(keys=8, sent_twice=["a"], detected=["a"], outside_the_window=[], lost=[],
                          send_events_dropped=3)
    assert replace(CLEAN, residual=fine).ok
    assert "residual: 1 double with SES's Send events lost, 1 detected" in replace(CLEAN, residual=fine).verdict
    assert not replace(CLEAN, residual=replace(fine, detected=[])).ok
    assert not replace(CLEAN, residual=replace(fine, outside_the_window=["a"])).ok
    assert "the residual (8 keys, 3 Send events lost" in render_text(replace(CLEAN, residual=fine))


def test_poison_missing_from_the_dlq_or_unexpected_mail_fails():
    assert not replace(CLEAN, dead_letters={"invalid-message": 1}).ok
    assert replace(CLEAN, dead_letters={"invalid-message": 1},
                   refused_keys_not_dead_lettered={"r": "UNKNOWN"}).ok
    assert not replace(CLEAN, unexpected_emails=1).ok
    assert "emails per key" in render_text(CLEAN)


def test_a_job_dead_lettered_twice_counts_once_and_keyless_poison_counts_per_message(pipeline):
    from consumer_harness import FakeClock, FakeContext, event, job, sqs_record

    from sendonce_local.demo.report_build import _dead_letters

    refused = job("k:refused", **{"from": "x@unverified.example.net"})
    # Two copies of one refused job (a delayed copy and its original), and two distinct unreadable bodies.
    pipeline.consumer().handle(event(sqs_record(refused), sqs_record(refused), sqs_record("{oops"),
                                     sqs_record("{oops")), FakeContext(FakeClock()))
    reasons, _, copies, keys = _dead_letters(pipeline.dead_letter_queue_url)
    assert dict(reasons) == {"ses-refused": 1, "invalid-message": 2} and copies == 1
    assert "k:refused" in keys


def test_the_residual_fails_when_detection_was_not_exercised():
    untried = ResidualReport(keys=8, sent_twice=[], detected=[], outside_the_window=[], lost=[],
                             send_events_dropped=3)
    report = replace(CLEAN, residual=untried)
    assert not report.ok and "detection not exercised" in report.verdict


def test_a_missed_aim_is_said_never_under_a_bare_pass():
    from sendonce_local.demo.scenarios.load import BurstReport

    slow = BurstReport(rate=5, jobs=50, keys=50, pollers=5, emails_per_key={1: 50}, keys_sent_twice=[], keys_lost=[],
                       dead_letters=0, drain_s=30.0, sent_rate=2.0, throttles=0, invocations=20, aws_calls={})
    report = replace(CLEAN, burst=slow)
    # A missed aim is no failure: the verdict still reads PASS first, and says the aims are not the guarantee.
    assert report.ok and report.verdict.startswith("PASS: ") and "AIMS MISSED" not in report.verdict
    assert "; performance aims, not part of the guarantee, missed: " in report.verdict
    assert "burst drained in 3.00x the ideal (aim 1.15x)" in report.verdict
    assert "burst at 40% of SES's rate (aim 90%)" in report.verdict
    assert replace(CLEAN, too_slow="round trip 80 ms").verdict.endswith("(timings not meaningful: round trip 80 ms)")


def test_the_outcome_events_the_app_heard_must_match_the_ledger():
    from sendonce_local.demo.outcome_check import OutcomeEventsCheck

    heard = replace(CLEAN, phases={"outcome_events": OutcomeEventsCheck(
        {"bounced": 1, "complained": 1}, {"bounced": 1, "complained": 1}, events=3)})
    heard_line = "outcome events the app heard, every phase's keys (3 events): bounced 1 (ledger 1)"
    assert heard.ok and heard_line in render_text(heard)
    missed = replace(CLEAN, phases={"outcome_events": OutcomeEventsCheck(
        {"bounced": 0, "complained": 1}, {"bounced": 1, "complained": 1}, events=1)})
    assert not missed.ok and "bounced 0 (ledger 1)" in missed.verdict and "MISMATCH" in missed.verdict


def test_the_chart_writes_every_count_on_its_bar_zero_rows_included(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sendonce_local.demo import report_chart as chart

    figure, (keys, outcomes) = plt.subplots(1, 2)
    chart._emails_per_key(keys, CLEAN)
    chart._outcomes(outcomes, CLEAN)
    assert [label.get_text() for label in keys.get_yticklabels()] == ["0 emails", "1 email", "2 emails"]
    assert [text.get_text() for text in keys.texts] == ["0", "10", "0"]
    assert [text.get_text() for text in outcomes.texts] == ["10", "0", "0", "0", "2"]
    plt.close(figure)
    written = chart.write_outputs(CLEAN, tmp_path)
    assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _attachments_report(sends: list[dict]) -> AttachmentsReport:
    per_key, problems = check_sends(EXPECTED_ATTACHMENTS, sends)
    return AttachmentsReport(
        emails=2, inline_receipts=1, s3_receipts=0, inline_images=0, entity_ref_resets=1,
        unsubscribe_notifications=0, inline_body_bytes=1000, s3_body_bytes=0, bucket="b", files_uploaded=0,
        objects_in_bucket=0, consumers_killed=1, emails_per_key=dict(sorted(Counter(per_key.values()).items())),
        attachments_checked=1, problems=problems)


PDF = {"fileName": "invoice-1.pdf", "contentType": "application/pdf", "disposition": "ATTACHMENT",
       "contentId": None, "size": 10, "sha256": "ab" * 32}
EXPECTED_ATTACHMENTS = {
    "Invoice INV-1": ExpectedEmail("receipt:1", (attachment_row(PDF),), ()),
    "Password reset request r1": ExpectedEmail("reset:r1", (), (("X-Entity-Ref-ID", "r1"),)),
}
GOOD_SENDS = [{"subject": "Invoice INV-1", "attachments": [PDF], "headers": []},
              {"subject": "Password reset request r1", "attachments": [], "headers": [["X-Entity-Ref-ID", "r1"]]}]


def test_the_attachments_phase_passes_when_each_email_carried_exactly_its_attachments_and_headers_once():
    report = replace(CLEAN, phases={"attachments": _attachments_report(GOOD_SENDS)})
    assert report.ok and "2 emails each once with exactly its attachments" in report.verdict
    assert "-> PASS" in render_text(report)


@pytest.mark.parametrize("broken", [
    [{**GOOD_SENDS[0], "attachments": []}, GOOD_SENDS[1]],  # an attachment missing
    [{**GOOD_SENDS[0], "attachments": [{**PDF, "sha256": "cd" * 32}]}, GOOD_SENDS[1]],  # a wrong file
    [{**GOOD_SENDS[0], "attachments": [PDF, PDF]}, GOOD_SENDS[1]],  # an attachment doubled
    [GOOD_SENDS[0], {**GOOD_SENDS[1], "headers": []}],  # a header missing
    [GOOD_SENDS[0], {**GOOD_SENDS[1], "headers": [["X-Entity-Ref-ID", "r2"]]}],  # a wrong header
    [GOOD_SENDS[0], GOOD_SENDS[0], GOOD_SENDS[1]],  # an email doubled
    [GOOD_SENDS[1]],  # an email lost
], ids=["attachment missing", "wrong file", "attachment doubled", "header missing", "wrong header", "email doubled",
        "email lost"])
def test_the_verdict_fails_when_an_email_misses_doubles_or_changes_an_attachment_or_a_header(broken):
    report = replace(CLEAN, phases={"attachments": _attachments_report(broken)})
    assert not report.ok and "attachments and headers: FAIL" in report.verdict, report.verdict


def test_the_verdict_fails_when_a_retried_producer_left_a_second_object():
    attachments = replace(_attachments_report(GOOD_SENDS), files_uploaded=1, objects_in_bucket=2)
    assert not replace(CLEAN, phases={"attachments": attachments}).ok


# -- the flood ------------------------------------------------------------------------------------------------------

def _flood(**changes: object):
    from sendonce_local.demo.scenarios.flood import FloodReport

    report = FloodReport(
        rate=5, flood_jobs=80, arrivals=4, flood_tenant="northwind", quiet_tenant="contoso",
        emails_per_key={1: 96}, keys_sent_twice=[], keys_lost=[], dead_letters=0, wrong_tenant=[],
        flood_drain_s=18.0, function_timeout_s=5, batch_size=2,
        waits_s={"urgent": {"alone": [0.3, 0.4, 0.3, 0.5], "flood": [0.4, 0.5, 0.6, 0.8]},
                 "quiet": {"alone": [0.3, 0.3, 0.4, 0.4], "flood": [0.5, 0.6, 0.7, 0.8]}})
    return replace(report, **changes)


def test_the_flood_passes_with_every_key_once_and_says_each_one_s_wait_against_alone():
    flood = _flood()
    report = replace(CLEAN, phases={"flood": flood})
    assert report.ok and flood.missed_aims() == [] and report.aims_missed == []
    assert "; flood: 96 keys each once through 80 bulk jobs, none in the DLQs" in report.verdict
    assert flood.p("urgent", "flood", 0.95) == 0.8 and flood.p("urgent", "alone", 0.5) == 0.3  # nearest rank
    assert flood.ratio("urgent") == pytest.approx(1.6)
    text = render_text(report)
    assert "flood: 80 bulk jobs of tenant northwind at 40 x SES's 5 emails/s" in text
    assert "the quiet tenant contoso's time to SES: p50 0.60 s, p95 0.80 s during the flood; alone p50 0.30 s" in text
    written = report.as_dict()["flood"]
    assert written["times_s"]["urgent"]["flood"] == {"p50": 0.5, "p95": 0.8} and written["ok"] is True
    assert written["times_s"]["quiet"]["p95_ratio"] == 2.0


def test_a_flood_wait_past_twice_alone_is_a_missed_aim_not_a_failure():
    slow = _flood(waits_s={"urgent": {"alone": [0.3], "flood": [0.4]}, "quiet": {"alone": [0.4], "flood": [6.0]}})
    report = replace(CLEAN, phases={"flood": slow})
    assert report.ok and report.verdict.startswith("PASS: ")
    assert report.aims_missed == ["the quiet tenant contoso's p95 time to SES during the flood 15.0x alone "
                                  "(6.00 s against 0.40 s; aim 2x)"]
    assert "performance aims, not part of the guarantee, missed: the quiet tenant contoso's" in report.verdict
    assert report.as_dict()["aims_missed"] == report.aims_missed


@pytest.mark.parametrize("broken, said", [
    ({"keys_sent_twice": ["flood:1"], "emails_per_key": {1: 95, 2: 1}}, "1 keys sent twice"),
    ({"keys_lost": ["quiet:flood:1"], "emails_per_key": {0: 1, 1: 95}}, "1 keys not sent"),
    ({"dead_letters": 2}, "2 jobs in the DLQs"),
    ({"wrong_tenant": ["quiet:flood:1"]}, "1 sent under another tenant"),
    ({"drained": False}, "not drained within its bound"),
], ids=["doubled", "lost", "dead-lettered", "wrong tenant", "not drained"])
def test_the_flood_fails_the_demo_when_a_key_is_doubled_lost_dead_lettered_or_sent_under_another_tenant(broken, said):
    report = replace(CLEAN, phases={"flood": _flood(**broken)})
    assert not report.ok and f"flood: {said}" in report.verdict, report.verdict


@settings(max_examples=examples(100), deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32), arrivals=st.integers(min_value=1, max_value=24),
       gap_s=st.sampled_from([1.0, 2.0]))
def test_flood_arrivals_come_at_random_times_within_their_halves_alike_alone_and_in_the_flood(seed, arrivals, gap_s):
    """Each urgent job in the first half of its gap, each of the quiet tenant's in the second; seeded, so the
    flood run's arrivals are the alone run's. Fixed times would meet the instances' send cadences at one phase."""
    from sendonce_local.demo.scenarios.flood import QUIET, URGENT, FloodPlan, _schedule

    plan = FloodPlan(flood_s=0.2, arrivals=arrivals, gap_s=gap_s)

    def arrivals_of(run: str) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {URGENT: [], QUIET: []}
        for offset, batch in _schedule(plan, 5.0, run, seed):
            for _key, who in batch:
                if who in times:
                    times[who].append(offset)
        return times

    alone, flood = arrivals_of("alone"), arrivals_of("flood")
    assert alone == flood
    for n, (urgent, quiet) in enumerate(zip(alone[URGENT], alone[QUIET], strict=True)):
        start = plan.lead_s + n * gap_s
        assert start <= urgent < start + gap_s / 2 <= quiet < start + gap_s


def test_flood_arrivals_meet_a_one_second_grid_at_spread_phases():
    from sendonce_local.demo.scenarios.flood import QUIET, FloodPlan, _schedule

    phases = [offset % 1.0 for offset, batch in _schedule(FloodPlan(0.2, 12, 2.0), 5.0, "alone", 31)
              if batch[0][1] == QUIET]
    assert max(phases) - min(phases) > 0.5  # fixed 2 s apart, all twelve met it at one phase


def test_every_phase_is_one_module_and_one_entry_whose_report_says_what_the_verdict_needs():
    from pathlib import Path

    from sendonce_local.demo import phases
    from sendonce_local.demo.phase import PhaseReport
    from sendonce_local.demo.phases import PHASES

    # The exactly-once traffic the report's own count is made of; every other phase is an entry.
    traffic = {"traffic", "residual", "bursts"}
    modules = {path.stem for path in Path(phases.__file__).parent.glob("*.py")} - {"__init__"}
    assert sorted(phase.run.__module__.rsplit(".", 1)[1] for phase in PHASES) == sorted(modules - traffic)
    assert len({phase.name for phase in PHASES}) == len(PHASES)
    assert PHASES[-1].name == "outcome_events"  # it stops the publisher the others' writes reach the app through
    reports = [report for report in PhaseReport.__subclasses__()]
    assert {type.__name__ for type in reports} >= {"FloodReport", "SqlOutboxReport", "AttachmentsReport",
                                                   "OutcomeEventsCheck"}
    for report in reports:  # what the verdict and the text need, each said by the phase's own report
        assert report.lines is not PhaseReport.lines and report.failure is not PhaseReport.failure, report
