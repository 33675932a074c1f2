"""The demo's report files: its JSON, and a chart of six panels, each a question a reader asks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .report import Report, ResidualReport
from .scenarios.load import BurstReport


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
                 label=f"drained at {burst.drain_s:.0f} s ({burst.drain_ratio:.2f}x ideal from the first accept)")
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
