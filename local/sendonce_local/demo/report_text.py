"""The demo's report as text: the verdict first, then each phase's counts."""

from __future__ import annotations

from .report import Report, ResidualReport


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
        f"  dead-letter queue ({sum(report.dead_letters.values())} messages, {report.expected_dead_letters} expected, "
        f"{report.dead_letter_copies} duplicate copies):",
        dlq,
        *(f"    refused job not in the DLQ: {k}: ledger says {status} (its worker was killed mid-send)"
          for k, status in report.refused_keys_not_dead_lettered.items()),
        *_render_residual(report.residual),
        *(report.burst.lines() if report.burst else []),
        *(line for fault_burst in report.fault_bursts for line in fault_burst.lines()),
        *(line for phase in report.phase_reports for line in phase.lines()),
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
