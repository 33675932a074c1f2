"""The README's main job, end to end: a real `cdk deploy` of examples/app.py to the embedded emulator, real
traffic through the deployed consumer with workers killed mid-batch, and the report read from SES."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sendonce_local.cli import main as local_cli
from sendonce_local.demo.options import DemoOptions
from sendonce_local.demo.phases.mis_keyed import HANDED_OVER
from sendonce_local.demo.phases.mis_keyed import ORDERS as MIS_KEYED_ORDERS
from sendonce_local.demo.run import run_demo
from sendonce_local.demo.scenarios.ses_stops import StopsPlan
from sendonce_local.demo.scenarios.ses_stops_report import MOVING_AIM_S
from sendonce_local.demo.workload import build_workload

# The demo itself, minutes long: make test-demo (CI runs it); make demo runs the full workload.
pytestmark = pytest.mark.demo

ROOT = Path(__file__).resolve().parents[1]
KEYS, SEED, ORDERS = 30, 7, 4
BURST_KEYS = 25  # a small version of the load scenario: five times the demo's SES rate of 5 emails/s
FAULT_BURST_KEYS = 10  # each of the two bursts through DynamoDB and SQS trouble
FLOOD_S, FLOOD_ARRIVALS = 0.4, 4  # 80 bulk jobs at 40 x 5 emails/s; four urgent jobs and four quiet-tenant jobs
# SES stops: a tenant's sending disabled for 15 s through a flood as large, then the account's paused for 15 s.
STOPS_PAUSE_S = 15


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory):
    assert shutil.which("cdk"), "the CDK CLI is not on PATH: run the tests with `make test`"
    out = tmp_path_factory.mktemp("demo")
    lines: list[str] = []
    report = run_demo(DemoOptions(project_dir=ROOT, out_dir=out, keys=KEYS, orders=ORDERS, fault_probability=0.2,
                                  seed=SEED, burst_keys=BURST_KEYS, fault_burst_keys=FAULT_BURST_KEYS,
                                  fault_stretch_s=5, flood_s=FLOOD_S, flood_arrivals=FLOOD_ARRIVALS,
                                  stops_pause_s=STOPS_PAUSE_S, stops_flood_s=FLOOD_S, stops_arrivals=FLOOD_ARRIVALS),
                     say=lines.append)
    return report, out, "\n".join(lines)


def test_with_every_ses_event_delivered_each_key_is_sent_exactly_once_and_nothing_is_left_unknown(demo):
    report, _, output = demo
    assert report.ok, output
    assert report.policy == "resend-without-evidence"
    assert report.distinct_keys == KEYS + ORDERS
    assert report.emails_per_key == {1: KEYS + ORDERS}
    assert report.keys_sent_twice == [] and report.keys_lost == {} and report.unknown_records == 0
    assert report.unexpected_emails == 0
    assert report.confirmed_by_ses == KEYS + ORDERS  # SES's events reached every record through the deployed rule


def test_the_report_shows_delivery_outcomes_and_the_time_to_confirmation(demo):
    report, _, output = demo
    assert report.delivery_outcomes["delivered"] >= KEYS
    assert report.delivery_outcomes.get("bounced (Permanent/General)", 0) >= 1  # bounce@ the mailbox simulator
    assert report.confirmation_ms["p50"] > 0
    assert "delivery outcomes of these keys (from SES's events)" in output


def test_the_app_subscribed_with_on_outcome_hears_every_bounce_and_complaint_the_ledger_holds(demo):
    report, _, output = demo
    check = report.phases["outcome_events"]
    assert check is not None and check.ok, check
    assert check.heard["bounced"] >= 1 and check.heard["complained"] >= 1  # the mailbox simulator's
    assert "outcome events the app heard" in output


def test_a_burst_beyond_ses_rate_is_throttled_into_order_with_nothing_dead_lettered_lost_or_doubled(demo):
    report, _, output = demo
    burst = report.burst
    assert burst is not None and burst.keys == BURST_KEYS and burst.rate == 5
    assert burst.ok, burst.lines()
    assert burst.emails_per_key == {1: BURST_KEYS} and burst.dead_letters == 0
    assert burst.sent_rate > 0 and burst.drain_s > 0 and burst.invocations > 0
    assert burst.aws_calls["sesv2"] >= BURST_KEYS
    assert "a burst of 25 keys while the emulator's SES accepts 5 emails/s" in output


def test_bursts_through_throttled_and_late_dynamodb_and_sqs_answers_lose_double_and_dead_letter_nothing(demo):
    """The deployed consumer's own DynamoDB and SQS calls throttled, then answered late past its read timeout (the
    call carried out, the answer lost), with invocations killed at their deadline and right after a delayed copy:
    every key once (counted in the emulator's SES), none in the DLQ, the queue within twice the jobs."""
    report, _, output = demo
    throttled, late = report.fault_bursts
    for fault_burst in (throttled, late):
        assert fault_burst.ok, fault_burst.lines()
        assert fault_burst.emails_per_key == {1: FAULT_BURST_KEYS} and fault_burst.dead_letters == 0
        assert fault_burst.peak_depth <= 2 * fault_burst.jobs
        assert fault_burst.proxy_hits, fault_burst.proxy_requests  # the trouble really met the consumer's calls
    assert "throttling" in throttled.stretch and "late" in late.stretch
    assert "slow and throttled answers: 2 bursts of 10 keys" in output


def test_urgent_jobs_and_a_quiet_tenant_s_go_through_a_bulk_flood_each_once_and_timed_against_alone(demo):
    """One tenant floods the bulk lane at 40 x SES's rate while urgent jobs and a second tenant's arrive: every key
    once (counted in the emulator's SES), none in either lane's DLQ, each send under its job's SES tenant, and each
    one's time to SES, from the emulator's log of sends, beside its time alone (a performance aim, not the
    guarantee)."""
    report, out, output = demo
    flood = report.phases["flood"]
    assert flood is not None and flood.ok, flood.lines() if flood else output
    assert flood.flood_jobs == 80 and (flood.flood_tenant, flood.quiet_tenant) == ("northwind", "contoso")
    assert flood.emails_per_key == {1: flood.flood_jobs + 4 * FLOOD_ARRIVALS}
    assert flood.dead_letters == 0 and flood.wrong_tenant == []
    for who in ("urgent", "quiet"):
        assert [len(flood.waits_s[who][run]) for run in ("alone", "flood")] == [FLOOD_ARRIVALS, FLOOD_ARRIVALS]
        assert all(wait > 0 for run in ("alone", "flood") for wait in flood.waits_s[who][run])
    assert "[9/11] the flood: tenant northwind's 80 bulk jobs at 40 x SES's 5 emails/s" in output
    assert json.loads((out / "report.json").read_text())["flood"]["times_s"]["urgent"]["flood"]["p95"] > 0


def test_a_tenants_stop_and_the_accounts_lose_nothing_and_hold_the_other_tenant_back_in_nothing(demo):
    """One tenant's sending disabled while its jobs flood the bulk lane, then the account's paused: every key once
    (counted from the emulator's SES), none in a DLQ, the other tenant's waits as alone, and SES asked little."""
    report, out, output = demo
    stops = report.phases["ses_stops"]
    assert stops is not None and stops.ok, stops.lines() if stops else output
    assert (stops.flood_tenant, stops.quiet_tenant) == ("northwind", "contoso") and stops.flood_jobs == 80
    # The flood, the quiet tenant's arrivals alone, through the tenant's stop and the account's, and urgent jobs.
    assert stops.emails_per_key == {1: stops.flood_jobs + 4 * FLOOD_ARRIVALS}
    assert stops.dead_letters == 0 and stops.keys_lost == [] and stops.keys_sent_twice == []
    assert [len(stops.waits_s[run]) for run in ("alone", "tenant_stopped")] == [FLOOD_ARRIVALS, FLOOD_ARRIVALS]
    # Parked, not asked: each lane learns each stop from one refusal and asks once a minute (plus SES's throttling
    # of the flood once the tenant sends again), far from a request per job per redelivery.
    assert stops.ses_requests - stops.sends < stops.flood_jobs
    # Each stop's backlog moved on the schedule watch's run after SES sent again (its rule played every minute, as
    # deployed; SQS's delays their own), and the output says when.
    assert set(stops.moving_after_s) == {"tenant northwind", "the account"}
    assert all(0 <= after_s <= MOVING_AIM_S for after_s in stops.moving_after_s.values()), stops.moving_after_s
    assert "the parked backlog started moving" in output and "played: " in output
    assert json.loads((out / "report.json").read_text())["ses_stops"]["ok"] is True
    # One-time codes enqueued as the account's pause began, each valid 5 s: stale once SES sends, so never sent.
    assert stops.codes == StopsPlan.codes > 0 and stops.codes_sent == 0 and stops.codes_expired == stops.codes


def test_a_producer_keying_receipts_by_sqs_message_id_gets_each_sent_once_its_second_copies_held(demo):
    report, out, output = demo
    mis_keyed = report.phases["mis_keyed"]
    assert mis_keyed is not None and mis_keyed.ok, mis_keyed.lines() if mis_keyed else output
    events = MIS_KEYED_ORDERS * HANDED_OVER
    assert (mis_keyed.orders, mis_keyed.events, mis_keyed.keys) == (MIS_KEYED_ORDERS, events, events)
    assert mis_keyed.emails_per_order == {1: MIS_KEYED_ORDERS} and mis_keyed.held == events - MIS_KEYED_ORDERS
    assert "the same content under key" in mis_keyed.held_reason, mis_keyed.held_reason
    assert "suspected-double" not in report.dead_letters  # deleted from the DLQ once counted, as an operator would
    assert json.loads((out / "report.json").read_text())["mis_keyed"]["ok"] is True


def test_with_send_events_lost_the_only_doubles_are_detected_and_inside_the_crash_window(demo):
    report, _, _ = demo
    residual = report.residual
    assert residual is not None and residual.send_events_dropped >= 1
    assert residual.lost == [] and residual.outside_the_window == []
    assert set(residual.sent_twice) <= set(residual.detected)


def test_orders_written_through_the_outbox_are_sent_once_and_their_retries_commit(demo):
    report, _, output = demo
    assert f"{ORDERS} orders written with their receipt in one transaction (outbox)" in output
    assert f"{ORDERS} retries committed, the outbox kept each receipt intent once" in output
    assert report.keys_sent_twice == []


def test_poison_and_refused_jobs_end_in_the_dlq_with_their_reasons(demo):
    report, _, _ = demo
    kinds = build_workload(KEYS, SEED).kinds
    assert report.dead_letters["invalid-message"] == kinds["malformed"]
    # A refused job whose worker was killed right after SES answered is in the crash window: recorded UNKNOWN.
    refused = report.dead_letters.get("ses-refused", 0) + len(report.refused_keys_not_dead_lettered)
    assert refused == kinds["ses_refused"]
    assert set(report.refused_keys_not_dead_lettered.values()) <= {"UNKNOWN"}
    if "ses-refused" in report.dead_letters:
        assert "MessageRejected" in report.dead_letter_samples["ses-refused"]


def test_the_traffic_really_went_through_the_deployed_function_with_faults(demo):
    report, out, output = demo
    assert report.jobs_enqueued == build_workload(KEYS, SEED).jobs
    assert report.deliveries_to_handler >= report.jobs_enqueued
    assert report.runner["faults_armed"] >= 1
    assert "cdk deploy SendOnceExample" in output
    assert "✅  SendOnceExample" in (out / "cdk.log").read_text()
    outcomes = [json.loads(line) for line in (out / "consumer.log").read_text().splitlines()
                if line.startswith('{"level"') and '"outcome"' in line]  # (the watches' lines are there too)
    assert {"sent", "duplicate", "invalid_message", "refused"} <= {o["outcome"] for o in outcomes}


def test_the_emulator_gaps_are_said_not_hidden(demo):
    report, _, output = demo
    assert any("TimeToLiveSpecification" in note for note in report.emulator_notes)
    assert "emulator gap" in output


def test_the_report_is_written_as_json_and_a_png_chart(demo):
    report, out, _ = demo
    written = json.loads((out / "report.json").read_text())
    assert written["verdict"] == report.verdict and written["ok"] is True
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_runner_refuses_to_run_without_an_emulator(monkeypatch, capsys):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    assert local_cli(["run", "--stack", "SendOnceExample"]) == 2
    assert "talks only to an emulator" in capsys.readouterr().err
    assert os.environ.get("AWS_ENDPOINT_URL") is None
