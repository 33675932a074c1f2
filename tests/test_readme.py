"""The README, read as a new user reads it: short, its links work on a package index page, its steps in the order
they must be done, and its examples run (the CDK snippet synthesizes; the producer snippet enqueues, sends once
and reads back the very key it built)."""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
import boto3
from consumer_harness import FakeClock, FakeContext, event, sqs_record

from tools.docs_hooks import relative_site_links

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SITE = "https://sendonce.github.io/sendonce/"
REPOSITORY = "https://github.com/sendonce/sendonce/blob/main/"
RAW = "https://raw.githubusercontent.com/sendonce/sendonce/main/"


def _python_blocks() -> list[str]:
    blocks = re.findall(r"(?ms)^( *)```python\n(.*?)^\1```", README)
    return ["\n".join(line[len(indent):] for line in body.splitlines()) for indent, body in blocks]


def test_the_readme_fits_in_three_hundred_lines():
    assert len(README.splitlines()) <= 300


def test_every_readme_link_is_absolute_and_points_at_something_that_exists():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert links
    for link in links:
        assert link.startswith("https://"), f"{link}: a relative link breaks on a package index page"
        if link.startswith(SITE):
            page = relative_site_links(f"]({link})", SITE, "index.md")[2:-1].split("#")[0]
            assert (ROOT / "docs" / page).is_file(), link
        elif link.startswith(REPOSITORY):
            assert (ROOT / link.removeprefix(REPOSITORY)).exists(), link
        elif link.startswith(RAW):
            assert (ROOT / link.removeprefix(RAW)).exists(), link


def test_the_packages_are_said_to_be_off_pypi_before_any_pip_install():
    assert README.index("until they are, build them from a checkout") < README.index("pip install")
    assert "pip install --find-links dist" in README


def test_the_quickstart_verifies_the_ses_identity_and_leaves_the_sandbox_before_deploying():
    quickstart = README.split("## Quickstart on AWS", 1)[1].split("\n## ", 1)[0]
    assert quickstart.index("Verify the domain") < quickstart.index("SES sandbox") < quickstart.index("cdk deploy")
    assert "request production access" in quickstart


def test_the_readme_says_which_policy_for_receipts_and_for_password_resets_and_how_late_a_crash_resends():
    choosing = README.split("## Choosing a key and a policy", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"Receipts.*`RESEND_WITHOUT_EVIDENCE`", choosing)
    assert re.search(r"Password resets.*`NEVER_RESEND`", choosing)
    assert "The delay after a crash" in choosing and "evidence_grace_period" in choosing


def test_the_guarantee_and_its_residual_are_stated_together():
    guarantee = README.split("## The guarantee", 1)[1].split("\n## ", 1)[0]
    assert "with one exception" in guarantee and "**sent twice**" in guarantee and "**not sent at all**" in guarantee
    assert "nothing is lost and nothing is sent twice" not in README


def test_the_quickstart_stack_synthesizes(tmp_path):
    [stack_code] = [block for block in _python_blocks() if "SendOnceEmailQueue(" in block]
    code = stack_code.replace("app = cdk.App()", f"app = cdk.App(outdir={str(tmp_path)!r})")
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    template = cdk.assertions.Template.from_stack(namespace["app"].node.find_child("Shop"))  # type: ignore[attr-defined]
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 3)  # consumer, recorder, outcome publisher


def test_the_producer_example_sends_once_and_status_finds_the_key_it_built(pipeline):
    [producer_code] = [block for block in _python_blocks() if "from sendonce_producer" in block]
    queue_url = boto3.client("sqs").create_queue(QueueName="readme-jobs")["QueueUrl"]
    namespace = {"queue_url": queue_url, "table_name": pipeline.table_name}
    exec(compile(producer_code, "README.md", "exec"), namespace)
    key, job = namespace["key"], namespace["job"]
    assert namespace["record"] is None  # enqueued, no worker yet
    namespace["shop"].enqueue(job)  # the comment's promise: enqueued twice, one email
    clock = FakeClock()
    consumer = pipeline.consumer(clock)
    messages = boto3.client("sqs").receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10)["Messages"]
    assert len(messages) == 2
    consumer.handle(event(*(sqs_record(m["Body"]) for m in messages)), FakeContext(clock))
    record = namespace["shop"].status(key)
    assert record is not None and record.state.value == "SENT"
    sent = [m for m in pipeline.aws.sent_emails() if getattr(m, "subject", "") == "Your order has shipped"]
    assert len(sent) == 1
    # The operator's command in the next step asks for the very key the example built.
    [shell_key] = re.findall(r"sendonce --stack Shop status '([^']+)'", README)
    assert shell_key == key
