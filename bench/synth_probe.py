"""Run in a fresh interpreter: builds one stack (`sendonce` or `raw`) and prints the seconds its synth took."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import aws_cdk as cdk

ROOT = Path(__file__).resolve().parents[1]


def main(flavour: str) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    started = time.perf_counter()
    app = cdk.App(outdir=tempfile.mkdtemp())
    stack = cdk.Stack(app, "Bench")
    if flavour == "sendonce":
        from sendonce_constructs import SendOnceEmailQueue

        SendOnceEmailQueue(stack, "Receipts", sender="example.com")
    else:
        from raw_stack import raw_pipeline

        from sendonce_constructs.runtime_asset import runtime_asset_dir

        raw_pipeline(stack, str(runtime_asset_dir()))
    app.synth()
    print(f"{time.perf_counter() - started:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
