"""The wheels: the construct's carries the consumer as an importable package, the contract is a distribution of its
own, and the two installed into a fresh virtualenv outside the checkout synthesize a stack whose Lambda asset is
built from the installed packages."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = {name: ROOT / folder / name for name, folder in (("sendonce_runtime", "runtime"),
                                                             ("sendonce_contract", "contract"))}


def source_files(package: str) -> set[str]:
    root = SOURCES[package]
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.suffix in (".py", ".json") and "__pycache__" not in p.parts}


def build(project: Path, out: Path) -> None:
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(project)],
                   check=True, capture_output=True)


def requirements(wheel: Path) -> list[str]:
    archive = zipfile.ZipFile(wheel)
    metadata = archive.read(next(n for n in archive.namelist() if n.endswith("METADATA"))).decode()
    return [line.removeprefix("Requires-Dist: ") for line in metadata.splitlines() if line.startswith("Requires-Dist")]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    build(ROOT, out)
    build(ROOT / "contract", out)
    [construct] = out.glob("sendonce-*.whl")
    [contract] = out.glob("sendonce_contract-*.whl")
    return {"sendonce": construct, "sendonce-contract": contract}


def test_the_construct_wheel_ships_the_consumer_as_its_own_package_and_depends_on_the_contract(wheels):
    names = set(zipfile.ZipFile(wheels["sendonce"]).namelist())
    shipped = {n.removeprefix("sendonce_runtime/") for n in names if n.startswith("sendonce_runtime/")}
    assert shipped >= source_files("sendonce_runtime")
    assert "sendonce_constructs/py.typed" in names
    assert not any(n.startswith(("tests/", "examples/", "sendonce_constructs/_runtime", "sendonce_contract/",
                                 "sendonce_producer/")) for n in names)
    assert {"sendonce_ops/cli.py", "sendonce_local/cli/command.py", "sendonce_local/emulator/server.py"} <= names
    assert not [n for n in names if n.startswith("sendonce_testing/")]  # the test support is in no wheel
    version = next(n for n in zipfile.ZipFile(wheels["sendonce-contract"]).namelist() if n.endswith("METADATA"))
    contract_version = version.split("/")[0].removeprefix("sendonce_contract-").removesuffix(".dist-info")
    assert f"sendonce-contract=={contract_version}" in requirements(wheels["sendonce"])


def test_the_commands_are_the_operator_and_local_packages(wheels):
    archive = zipfile.ZipFile(wheels["sendonce"])
    entry_points = archive.read(next(n for n in archive.namelist() if n.endswith("entry_points.txt"))).decode()
    assert "sendonce = sendonce_ops.cli:main" in entry_points
    assert "sendonce-local = sendonce_local.cli:main" in entry_points
    extras = requirements(wheels["sendonce"])
    assert any(r.startswith("boto3") and "extra == 'ops'" in r for r in extras)
    assert any(r.startswith("moto") and "extra == 'local'" in r for r in extras)


def test_the_contract_wheel_has_no_dependency_and_no_lambda_code(wheels):
    names = set(zipfile.ZipFile(wheels["sendonce-contract"]).namelist())
    assert {n.removeprefix("sendonce_contract/") for n in names if n.startswith("sendonce_contract/")} >= (
        source_files("sendonce_contract"))
    assert not any(n.startswith(("sendonce_runtime/", "sendonce_constructs/")) for n in names)
    assert requirements(wheels["sendonce-contract"]) == []


@pytest.mark.slow
def test_installed_wheels_synthesize_a_stack_whose_asset_is_the_installed_packages(wheels, tmp_path: Path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())
    # Dependencies come from this environment's site-packages; sendonce and its contract only from the wheels.
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    *map(str, wheels.values())], check=True)
    app = tmp_path / "app.py"
    app.write_text(textwrap.dedent("""
        import json, pathlib, sys
        import aws_cdk as cdk
        import sendonce_constructs, sendonce_contract, sendonce_runtime
        from sendonce_constructs import SendOnceEmailQueue
        for package in (sendonce_constructs, sendonce_contract, sendonce_runtime):
            assert package.__file__.startswith(sys.prefix), package.__file__
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
    for package in SOURCES:
        assert {p.relative_to(asset / package).as_posix() for p in (asset / package).rglob("*")} == (
            source_files(package))
    assert sorted(p.name for p in asset.iterdir()) == sorted(SOURCES)
