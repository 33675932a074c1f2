"""The integration test on real AWS, checked offline: its app synthesizes to the committed snapshot (asset hashes
aside), and `make integ` refuses in one line without credentials. The real run is `make integ` (README, "On real
AWS")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "integ"))
import run as integ_run  # noqa: E402  (integ/run.py: the snapshot's reader is the one that writes it)
from integ_env import INTEG_PREFIX  # noqa: E402  (integ/integ_env.py)


def test_the_integration_test_synthesizes_to_its_committed_snapshot(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(INTEG_PREFIX)}
    integ_run.synth(tmp_path, env)
    synthesized = integ_run.snapshot_files(tmp_path)
    committed = integ_run.snapshot_files(integ_run.SNAPSHOT)
    assert sorted(synthesized) == sorted(committed) == ["SendOnceDefaultTestDeployAssertBC2D4F8C.template.json",
                                                         "SendOnceInteg.template.json"]
    for name, text in synthesized.items():
        assert integ_run.canonical(text) == integ_run.canonical(committed[name]), (
            f"{name} differs from the snapshot: if the change is meant, run `make integ-snapshot` and commit it")


def test_the_integration_test_asserts_what_the_readme_says_it_proves():
    assertions = json.loads((integ_run.SNAPSHOT / "SendOnceDefaultTestDeployAssertBC2D4F8C.template.json").read_text())
    calls = [r["Properties"] for r in assertions["Resources"].values() if r["Type"] == "Custom::DeployAssert@SdkCall"
             or "api" in r.get("Properties", {})]
    apis = [(c["service"], c["api"]) for c in calls]
    assert apis.count(("SQS", "sendMessage")) == 7  # a job twice, a bounce, a complaint, two poison jobs, a re-enqueue
    assert ("DynamoDB", "putItem") in apis and ("CloudWatch", "describeAlarms") in apis
    expected = " ".join(json.dumps(c.get("expected")) for c in calls)
    for proof in ("sesMessageIds", "sesAcceptedAt", "deliveredAt", "bouncedAt", "complainedAt", "MetricAlarms"):
        assert proof in expected


@pytest.mark.slow
def test_make_integ_refuses_in_one_line_without_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, str(ROOT / "integ" / "run.py"), "example.com"], env=env,
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("integ: make integ needs AWS credentials")
    via_make = subprocess.run(["make", "--no-print-directory", "integ", "SENDER=example.com"], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False, timeout=120)
    assert via_make.returncode == 2 and line in via_make.stderr


def test_the_cost_it_announces_counts_the_alarms_the_test_stack_deploys():
    # The count comes from the snapshot, so a new alarm cannot leave the announced cost behind (it said 8 of 13).
    template = json.loads((integ_run.SNAPSHOT / "SendOnceInteg.template.json").read_text())
    alarms = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) == integ_run.alarm_count() > 8
    assert f"and {len(alarms)} CloudWatch alarms for under an hour" in integ_run.cost()
