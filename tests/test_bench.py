"""The benchmark suite runs in its quick mode and writes a well-formed report (no timing is asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ["## 1. AWS calls per record", "## 2. Throughput", "## 3. Cold start", "## 4. The Lambda asset",
            "## 5. Synth time", "## 6. Dedupe table cost", "## 7. Per instance", "## 8. SES events as evidence"]


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
    assert re.search(r"\| sendonce handler, bytecode cached \| [\d.]+", text)
    assert "Machine:" in text and "Versions:" in text
    # With SES events on: two events per email (Send, Delivery), one recorder write each, batched by ten.
    assert "| recorder UpdateItem calls | 2.00 |" in text and "| SES events | 2.00 |" in text
    assert "| DynamoDB write request units | 4.00 (without events: 2.00) |" in text
