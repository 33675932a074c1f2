"""The release kit: `make dist` builds every distribution's sdist and wheel at the one release number, and each
sdist installs into a fresh virtualenv (building its wheel there, as pip does from the index) and imports."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

from sendonce_contract.release import __version__

ROOT = Path(__file__).resolve().parents[1]
# What each distribution's users import, and a line that proves it works without the checkout.
IMPORT_CHECKS = {
    "sendonce_contract": "from sendonce_contract.message import parse_job; from sendonce_contract.release import "
                         "__version__",
    "sendonce_producer": "from sendonce_producer import EmailJob; import sys; "
                         "assert not [m for m in sys.modules if m.startswith(('aws_cdk', 'sendonce_runtime'))]",
    # The construct synthesizes, staging the consumer's asset from the installed runtime and contract.
    "sendonce": "import aws_cdk as cdk; from sendonce_constructs import SendOnceEmailQueue; app = cdk.App(); "
                "SendOnceEmailQueue(cdk.Stack(app, 'S'), 'Q', sender='example.com'); "
                "assert app.synth().get_stack_by_name('S').template['Resources']",
}

pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(["make", "--no-print-directory", "dist", f"DIST={out}"], cwd=ROOT, check=True, capture_output=True)
    return out


def test_make_dist_builds_a_wheel_and_an_sdist_of_every_distribution_at_the_release_number(dist):
    names = sorted(path.name for path in dist.iterdir())
    assert names == sorted(f"{name}-{__version__}{suffix}" for name in IMPORT_CHECKS
                           for suffix in ("-py3-none-any.whl", ".tar.gz"))
    with tarfile.open(dist / f"sendonce-{__version__}.tar.gz") as sdist:
        members = {member.name.split("/", 1)[1] for member in sdist.getmembers() if "/" in member.name}
    assert {"README.md", "CHANGELOG.md", "LICENSE", "producer/hatch_build.py", "runtime/sendonce_runtime/handler.py",
            "sendonce_constructs/email_queue.py"} <= members
    assert {"ops/sendonce_ops/cli.py", "local/sendonce_local/cli/command.py"} <= members
    assert not [m for m in members if m.startswith(("tests/", "integ/", "examples/", "contract/", "bench/",
                                                    "testing/"))]


@pytest.mark.parametrize("distribution", sorted(IMPORT_CHECKS))
def test_each_sdist_installs_into_a_fresh_virtualenv_and_imports(dist, distribution, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Our own distributions come from the sdists only (the pins resolve to them); third-party ones from the index.
    sdists = [str(dist / f"{name}-{__version__}.tar.gz") for name in ("sendonce_contract", distribution)]
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-binary", "sendonce,sendonce-contract,sendonce-producer",
         "--find-links", str(dist), *dict.fromkeys(sdists)],
        capture_output=True, text=True, check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert install.returncode == 0, install.stderr[-3000:]
    check = subprocess.run([str(python), "-c", IMPORT_CHECKS[distribution]], cwd=tmp_path, capture_output=True,
                           text=True, check=False, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert check.returncode == 0, check.stderr[-3000:]
    shown = subprocess.run([str(python), "-m", "pip", "show", distribution.replace("_", "-")], capture_output=True,
                           text=True, check=True).stdout
    assert f"Version: {__version__}" in shown
    assert sys.prefix not in shown  # installed in the fresh virtualenv, not found in the project's


def test_make_dist_needs_only_what_building_needs():
    """No dev virtualenv and no Node.js: a checkout with Python and make builds every distribution."""
    planned = subprocess.run(["make", "--no-print-directory", "--dry-run", "--always-make", "dist", "DIST=/nowhere"],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout
    assert "npm" not in planned and ".venv/" not in planned and "-e " not in planned, planned
    assert "pip install --quiet 'build>=1.2' 'hatchling>=1.25'" in planned
