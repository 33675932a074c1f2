"""The wheel carries the consumer: installed into a fresh virtualenv outside the checkout, it synthesizes."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_FILES = {p.name for p in (ROOT / "runtime" / "sendonce_runtime").glob("*.py")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True, capture_output=True,
    )
    [built] = out.glob("sendonce-*.whl")
    return built


def test_wheel_ships_the_consumer_inside_the_construct_package(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = {n.rsplit("/", 1)[-1] for n in names if n.startswith("sendonce_constructs/_runtime/sendonce_runtime/")}
    assert bundled >= RUNTIME_FILES
    assert "sendonce_constructs/py.typed" in names
    assert not any(n.startswith(("tests/", "examples/")) for n in names)


@pytest.mark.slow
def test_installed_wheel_synthesizes_a_stack_with_the_bundled_asset(wheel: Path, tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    # Dependencies come from this environment's site-packages; sendonce itself only from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True)
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent("""
        import json, pathlib, sys
        import aws_cdk as cdk
        import sendonce_constructs
        from sendonce_constructs import SendOnceEmailQueue
        assert sys.prefix in sendonce_constructs.__file__, sendonce_constructs.__file__
        app = cdk.App(outdir=sys.argv[1])
        stack = cdk.Stack(app, "FromWheel")
        SendOnceEmailQueue(stack, "Receipts", sender="example.com")
        assembly = app.synth()
        template = json.loads(pathlib.Path(assembly.directory, "FromWheel.template.json").read_text())
        [function] = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
                      and r["Properties"]["Handler"] == "sendonce_runtime.handler.handler"]
        asset_hash = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
        print(pathlib.Path(assembly.directory, "asset." + asset_hash))
    """))
    out = tmp_path / "cdk.out"
    result = subprocess.run([str(python), str(app), str(out)], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    asset = Path(result.stdout.strip().splitlines()[-1])
    shipped = {p.name for p in (asset / "sendonce_runtime").glob("*.py")}
    assert shipped == RUNTIME_FILES
    assert not list(asset.rglob("__pycache__"))
