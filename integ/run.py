"""`make integ`: deploy the integration test (integ_sendonce.py) to your AWS account, let its assertions run, and
destroy it; `make integ-snapshot`: write the snapshot `make test` compares, with no AWS.

The steps are integ-runner's (deploy the test stack and its assertion stack, whose custom resources make the API
calls and wait for the assertions, then destroy both), run with the project's own CDK CLI: the newest integ-runner
on npm (2.197.x) reads cloud assemblies up to schema 53, and aws-cdk-lib 2.275 writes 55.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from integ_env import INTEG_PREFIX, INTEG_RUN, INTEG_SENDER

HERE = Path(__file__).resolve().parent
TEST = HERE / "integ_sendonce.py"
SNAPSHOT = HERE / "integ_sendonce.py.snapshot"
# What one run costs, for the user to read before it starts (us-east-1 prices; the stack lives 10 to 25 minutes).
def alarm_count() -> int:
    """The CloudWatch alarms the test stack deploys, counted in its committed snapshot (what the cost names)."""
    template = json.loads((SNAPSHOT / "SendOnceInteg.template.json").read_text(encoding="utf-8"))
    return sum(1 for resource in template["Resources"].values() if resource["Type"] == "AWS::CloudWatch::Alarm")


def cost() -> str:
    return ("about US$0.01: 7 SES emails to the mailbox simulator ($0.10 per 1,000), a few hundred Lambda, SQS, "
            "DynamoDB on-demand and EventBridge requests (free tier or fractions of a cent), and "
            f"{alarm_count()} CloudWatch alarms for under an hour ($0.10 per alarm-month)")
ASSET_HASH = re.compile(r"[0-9a-f]{64}")
# Each assertion carries the synth time as its salt, so that every deploy runs it again.
SALT = re.compile(r'"salt": "[0-9]+"')


class Refusal(Exception):
    """A reason not to start, said in one line."""


def synth(outdir: Path, env: dict[str, str] | None = None) -> None:
    """Synthesize the test app into ``outdir``, as integ-runner does (CDK_OUTDIR), with no AWS call."""
    subprocess.run([sys.executable, str(TEST)], check=True, capture_output=True,
                   env={**(env or os.environ), "CDK_OUTDIR": str(outdir)})


def snapshot_files(assembly: Path) -> dict[str, str]:
    """The templates of an assembly, by file name: what the snapshot holds (assets are not kept)."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(assembly.glob("*.template.json"))}


def canonical(template: str) -> object:
    """A template with its asset hashes and salts replaced: code changes and the clock move them, and they say
    nothing about the stack."""
    return json.loads(SALT.sub('"salt": "SALT"', ASSET_HASH.sub("ASSET", template)))


def write_snapshot() -> None:
    with tempfile.TemporaryDirectory() as out:
        synth(Path(out), {k: v for k, v in os.environ.items() if not k.startswith(INTEG_PREFIX)})
        if SNAPSHOT.exists():
            shutil.rmtree(SNAPSHOT)
        SNAPSHOT.mkdir()
        for name, text in snapshot_files(Path(out)).items():
            (SNAPSHOT / name).write_text(text, encoding="utf-8")
    print(f"wrote {SNAPSHOT.relative_to(HERE.parent)}")


def check_credentials(sender: str | None) -> str:
    """The region to run in; refuses without credentials, a region or a sender."""
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        raise Refusal("make integ needs AWS credentials (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) "
                      "and runs in your account; none were found")
    if not session.region_name:
        raise Refusal("make integ needs a region (AWS_REGION or your profile's region); none is set")
    if not sender:
        raise Refusal("make integ needs SENDER=<a domain or address verified in SES in this region>, e.g. "
                      "make integ SENDER=example.com")
    return session.region_name


def run(sender: str) -> int:
    region = check_credentials(sender)
    print(f"Deploying sendonce's integration test to {region} from {sender}; it costs {cost()}. "
          "It needs the CDK bootstrap stack (npx cdk bootstrap) and destroys what it made when done.", flush=True)
    env = {**os.environ, INTEG_SENDER: sender, INTEG_RUN: str(int(time.time())),
           "AWS_REGION": region, "CDK_DEFAULT_REGION": region}
    app = f"{sys.executable} {TEST}"
    with tempfile.TemporaryDirectory() as out:
        cdk = ["npx", "cdk", "--app", app, "--output", out]
        try:
            deployed = subprocess.run([*cdk, "deploy", "--all", "--require-approval", "never"], env=env, check=False)
        finally:
            subprocess.run([*cdk, "destroy", "--all", "--force"], env=env, check=False)
    if deployed.returncode != 0:
        print("FAILED: an assertion or the deploy failed (its reason is above)", file=sys.stderr)
        return 1
    print("PASSED: every assertion held on real AWS")
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["snapshot"]:
            write_snapshot()
            return 0
        return run(argv[0] if argv else "")
    except Refusal as refusal:
        print(f"integ: {refusal}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
