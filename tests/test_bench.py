"""The benchmark suite runs in its quick mode and writes a well-formed report (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.release

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ["## 1. AWS calls per record", "## 2. Throughput", "## 3. Cold start", "## 4. The Lambda asset",
            "## 5. Synth time", "## 6. Dedupe table cost", "## 7. Per instance", "## 8. SES events as evidence",
            "## 9e. A burst through slow and throttled answers",
            "## 9f. SES's stops", "## 11. Key privacy", "## 12. Outcome events",
            "## 13. A scheduled email", "## 14. The SQL outbox", "## 15. Attachments",
            "## 16. The mis-keyed-producer guard"]


def test_quick_bench_writes_every_section_with_figures(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    text = out.read_text()
    positions = [text.index(section) for section in SECTIONS]
    assert positions == sorted(positions)
    assert "| sendonce | first send | 1 PutItem, 1 SendEmail, 1 UpdateItem |" in text
    assert "| sendonce | duplicate | 1 PutItem |" in text
    assert re.search(r"\| 1 \| [\d.]+ \([\d.]+ to [\d.]+\) \| [\d.]+", text), "throughput rows with spreads"
    assert re.search(r"\| sendonce handler, precompiled_bytecode=True \(the asset.s own bytecode\), over boto3 "
                     r"\| [\d.]+ \([\d.]+ to [\d.]+\) \| \d+% \|", text)
    assert "Machine:" in text and "Versions:" in text
    # With SES events on: two events per email (Send, Delivery), one recorder write each, batched by ten.
    assert "| recorder UpdateItem calls | 2.00 |" in text and "| SES events | 2.00 |" in text
    assert "| DynamoDB write request units | 4.00 (without events: 2.00) |" in text
    # The SQL outbox: a backlog goes ten jobs per SendMessageBatch; a job committed alone is a request of its own.
    assert re.search(r"\| the stub \(5 ms round trip\) \| \d+ \(\d+ to \d+\) \| 0\.100 \(0\.100 to 0\.100\) \|", text)
    assert re.search(r"\| NOTIFY .* \| [\d.]+ \| [\d.]+ \| [\d.]+ to [\d.]+ \| 1\.00 \|", text)
    assert re.search(r"\| `add`: .* \| [\d.]+ \([\d.]+ to [\d.]+\) \|", text)


def test_the_key_privacy_section_runs_alone_and_replaces_only_itself(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n## 10. Before\n\nkept\n"
                   "## 11. Key privacy: the cost of a private key per email\n\nold\n")
    for _ in range(2):  # a second run replaces the section rather than adding another
        subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "key-privacy", "--out",
                        str(out)], check=True, capture_output=True, timeout=300)
    text = out.read_text()
    assert text.count("## 11. Key privacy") == 1 and "old" not in text and "## 10. Before\n\nkept\n" in text
    assert re.search(r"CPU per email: \*\*[\d.]+ \([\d.]+ to [\d.]+\) µs\*\*", text)
    assert "| order-1042:shipped:ada@example.org | 34 | 69 | 120 | 81 |" in text


@pytest.mark.slow
def test_the_outcome_event_and_scheduled_email_sections_count_what_they_cost(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    for section in ("outcome-events", "scheduled"):
        subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", section, "--out",
                        str(out)], check=True, capture_output=True, text=True, timeout=300)
    text = out.read_text()
    assert "outcome events per email: **2.00**" in text  # Send, and Delivery or Bounce, for each ordinary email
    # Two hours as delayed copies: one every 15 minutes, each sent, received and deleted; in the waiting room: its
    # write, the watch's send and delete, and the receive and delete of the message sent back.
    assert "| 2 h | delayed copies (before) | 9 | 8 | 0 | 24 |" in text
    assert "| 2 h | the waiting room | 2 | 1 | 2 | 5 |" in text


def test_the_attachments_section_counts_each_s3_request_and_prices_both_ways(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "attachments", "--out",
                    str(out)], check=True, capture_output=True, timeout=300)
    text = out.read_text()
    first_send = "1 PutItem, 1 SendEmail, 1 UpdateItem"
    assert f"| consumer calls | {first_send} | {first_send} | 1 GetObject, {first_send} |" in text
    assert re.search(r"\| CPU / plain \(same run\) \| 1\.00 \(1\.00 to 1\.00\) \| [\d.]+ \([\d.]+ to [\d.]+\) \|", text)
    assert "(`AttachmentStore`, `If-None-Match: *`): 1 PutObject answered 200" in text
    assert "(the same job offloaded again): 1 PutObject answered 412" in text
    assert "- the consumer: 1 GetObject; nothing else" in text
    # A 100 KB file is three 64 KB chunks inline (base64), each billed as an SQS request; a claim check is one.
    assert "| SQS requests billed per job | 1.20 | 5.20 | 1.20 | 1.20 |" in text


def test_the_guard_section_counts_the_writes_each_email_adds(tmp_path: Path):
    out = tmp_path / "BENCHMARKS.md"
    subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--only", "guard", "--out",
                    str(out)], check=True, capture_output=True, timeout=300)
    text = out.read_text()
    # The claim and the completion; then the content item and the recipient's count; then the suspect's mark.
    assert "| DynamoDB calls | 1 PutItem, 1 UpdateItem | 2 PutItem, 2 UpdateItem | 2 PutItem, 3 UpdateItem |" in text
    assert re.search(r"\| CPU against the guard off, same run \| 1 \| [\d.]+ \([\d.]+ to [\d.]+\)x \|", text)
    assert "a new email costs 2 more DynamoDB write(s)" in text
