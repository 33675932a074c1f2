"""Every expected failure of `sendonce-local` and `sendonce` is one clear line on stderr and exit code 2."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import boto3
import pytest

from sendonce_local.cli import main as local_cli
from sendonce_ops.cli import main as sendonce

ROOT = Path(__file__).resolve().parents[1]
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                        "AWS_WEB_IDENTITY_TOKEN_FILE")


def one_line_error(capsys, code: int, *expected: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for text in expected:
        assert text in err, err
    return err


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def no_emulator(monkeypatch):
    """An endpoint nobody listens on, and no SDK retries, so the failure comes at once."""
    endpoint = f"http://localhost:{closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    return endpoint


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask an instance metadata service
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # as in a new process: no credentials cached


@pytest.fixture
def deployed_looking_cdk_out(tmp_path) -> Path:
    cdk_out = tmp_path / "cdk.out"
    cdk_out.mkdir()
    (cdk_out / "Shop.template.json").write_text(json.dumps({"Resources": {}}))
    return cdk_out


def test_the_installed_demo_outside_a_checkout_says_to_run_it_from_one(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    one_line_error(capsys, local_cli(["demo", "--quick"]), "cdk.json, examples/app.py is not in",
                   "run it from a checkout of sendonce")


def test_the_demo_without_the_producer_says_how_to_install_it(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setitem(sys.modules, "sendonce_producer", None)
    one_line_error(capsys, local_cli(["demo", "--quick"]), "sendonce-producer, which is not installed",
                   "pip install ./producer")


def test_the_demo_without_a_cdk_cli_says_where_to_get_one(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/nonexistent")
    one_line_error(capsys, local_cli(["demo", "--quick"]), "the CDK CLI is not on PATH", "npm install aws-cdk")


def test_run_with_an_unreachable_emulator(no_emulator, deployed_looking_cdk_out, capsys):
    code = local_cli(["run", "--stack", "Shop", "--cdk-out", str(deployed_looking_cdk_out)])
    one_line_error(capsys, code, f"cannot reach the emulator at {no_emulator}", "sendonce-local serve")


def test_run_without_credentials(no_credentials, monkeypatch, deployed_looking_cdk_out, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://localhost:{closed_port()}")
    code = local_cli(["run", "--stack", "Shop", "--cdk-out", str(deployed_looking_cdk_out)])
    one_line_error(capsys, code, "no AWS credentials found")


def test_run_with_a_stack_not_synthesized_or_not_deployed(aws, tmp_path, deployed_looking_cdk_out, capsys):
    one_line_error(capsys, local_cli(["run", "--stack", "Shop", "--cdk-out", str(tmp_path / "missing")]),
                   "Shop.template.json is missing: synthesize or deploy the stack first")
    one_line_error(capsys, local_cli(["run", "--stack", "Shop", "--cdk-out", str(deployed_looking_cdk_out)]),
                   "stack 'Shop' is not deployed here")


def test_run_with_a_stack_cdk_out_does_not_hold_names_the_stacks_it_does(aws, deployed_looking_cdk_out, capsys):
    one_line_error(capsys, local_cli(["run", "--stack", "Nope", "--cdk-out", str(deployed_looking_cdk_out)]),
                   "Nope.template.json is missing", f"the stacks synthesized in {deployed_looking_cdk_out} are Shop",
                   "run with --stack Shop")
    (deployed_looking_cdk_out / "Other.template.json").write_text(json.dumps({"Resources": {}}))
    one_line_error(capsys, local_cli(["run", "--stack", "Nope", "--cdk-out", str(deployed_looking_cdk_out)]),
                   "are Other, Shop; run with --stack and one of them, or synthesize and deploy Nope first")


def test_run_with_a_stack_not_deployed_names_the_synthesized_ones_that_are(aws, tmp_path, capsys):
    cdk_out = tmp_path / "cdk.out"
    cdk_out.mkdir()
    template = {"Resources": {"Jobs": {"Type": "AWS::SQS::Queue"}}}
    for stack in ("Deployed", "Synthesized"):
        (cdk_out / f"{stack}.template.json").write_text(json.dumps(template))
    boto3.client("cloudformation").create_stack(StackName="Deployed", TemplateBody=json.dumps(template))
    one_line_error(capsys, local_cli(["run", "--stack", "Synthesized", "--cdk-out", str(cdk_out)]),
                   "stack 'Synthesized' is not deployed here", "Deployed is deployed here: run with --stack Deployed")


def test_sendonce_with_an_unreachable_endpoint(no_emulator, capsys):
    one_line_error(capsys, sendonce(["--stack", "Shop", "status", "k"]), f"cannot reach {no_emulator}")


def test_sendonce_without_credentials(no_credentials, monkeypatch, capsys):
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://localhost:{closed_port()}")
    one_line_error(capsys, sendonce(["--stack", "Shop", "status", "k"]), "no AWS credentials found",
                   "AWS_ACCESS_KEY_ID")


def test_sendonce_with_a_stack_that_is_not_there(aws, capsys):
    one_line_error(capsys, sendonce(["--stack", "NoSuchStack", "status", "k"]), "stack 'NoSuchStack' not found")


def usage_error(capsys, command, argv: list[str], *expected: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        command(argv)
    one_line_error(capsys, exit_.value.code, *expected, "--help`")


def test_sendonce_usage_errors_are_exit_code_2(capsys):
    usage_error(capsys, sendonce, ["status"], "sendonce status: the following arguments are required: key")
    usage_error(capsys, local_cli, ["run"], "sendonce-local run: the following arguments are required: --stack")
    usage_error(capsys, sendonce, ["dlq", "redrive", "--limit", "x"], "argument --limit: invalid int value: 'x'")
    usage_error(capsys, local_cli, ["run", "--stack", "Shop", "--faults", "2"],
                "argument --faults: invalid share from 0 to 1 value: '2'")
    usage_error(capsys, local_cli, ["demo", "--faults", "-1"], "argument --faults: invalid share from 0 to 1 value")


def test_info_without_a_pipeline_says_which_options_name_one(aws, capsys):
    one_line_error(capsys, sendonce(["info"]), "info needs a pipeline: --stack NAME")


def test_a_misspelt_option_is_named_with_its_closest_match_not_taken_for_the_next_word(capsys):
    # Without the check argparse reads `Shop` as the command and says "invalid choice: 'Shop'".
    usage_error(capsys, sendonce, ["--stak", "Shop", "info"], "unknown option --stak; did you mean --stack?")
    usage_error(capsys, local_cli, ["run", "--stack", "Shop", "--until-drianed"],
                "unknown option --until-drianed; did you mean --until-drained?")
    usage_error(capsys, local_cli, ["run", "--stack=Shop", "--cdk_out", "x"], "did you mean --cdk-out?")


def test_an_unknown_option_is_matched_against_its_own_command_and_points_to_that_command_s_help(capsys):
    # `--out` is the demo's: serve has no such option, so it is not offered (a new user's fresh clone found it was).
    with pytest.raises(SystemExit) as exit_:
        local_cli(["serve", "--bogus"])
    err = one_line_error(capsys, exit_.value.code, "sendonce-local serve: unknown option --bogus",
                         "(see `sendonce-local serve --help`)")
    assert "--out" not in err
    usage_error(capsys, sendonce, ["tenants", "--bogus"], "sendonce tenants: unknown option --bogus",
                "see `sendonce tenants --help`")
    usage_error(capsys, sendonce, ["--table", "dlq", "dlq", "redrive", "--limt", "2"],
                "sendonce dlq redrive: unknown option --limt; did you mean --limit?")
    # An abbreviated option's value is its value, whatever it spells (argparse takes --tab for --table).
    usage_error(capsys, sendonce, ["--tab", "status", "info", "--bogus"], "sendonce info: unknown option --bogus")


def test_a_command_s_help_opens_with_what_the_command_list_says_of_it(capsys):
    with pytest.raises(SystemExit) as exit_:
        sendonce(["tenants", "--help"])
    assert exit_.value.code == 0
    assert "each SES tenant's sending status as SES reports it" in " ".join(capsys.readouterr().out.split())
