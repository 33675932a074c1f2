"""The demo report's verdict: which outcomes break the promise and which are the documented window."""

from __future__ import annotations

from dataclasses import replace

from sendonce_constructs.local.report import Report, render_text

CLEAN = Report(
    policy="at-most-once", jobs_enqueued=12, distinct_keys=10, deliveries_to_handler=14, invocations=3,
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


def test_a_key_sent_twice_fails_at_most_once_only():
    report = replace(CLEAN, emails_per_key={1: 9, 2: 1}, keys_sent_twice=["k"])
    assert not report.ok and "1 keys sent twice" in report.verdict
    assert replace(report, policy="at-least-once").ok


def test_poison_missing_from_the_dlq_or_unexpected_mail_fails():
    assert not replace(CLEAN, dead_letters={"invalid-message": 1}).ok
    assert replace(CLEAN, dead_letters={"invalid-message": 1},
                   refused_keys_not_dead_lettered={"r": "UNKNOWN"}).ok
    assert not replace(CLEAN, unexpected_emails=1).ok
    assert "emails per key" in render_text(CLEAN)
