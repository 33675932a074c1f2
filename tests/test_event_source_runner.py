"""The local runner behaves as Lambda's SQS event source mapping does, each rule checked with a tiny handler."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import boto3
import pytest

from sendonce_local.lambda_service.instances import Ending, FunctionSpec, Invocation
from sendonce_local.lambda_service.sqs_source import EventSourceRunner, EventSourceSpec, FaultPlan, succeeded_ids

VISIBILITY_S = 1
FUNCTION_TIMEOUT_S = 2.0
# As AWS asks of a real mapping, the visibility outlasts the function: a redelivered record's invocation, cold after a
# kill, may take past one second on a loaded machine, and with 1 s its message came back a third time to the DLQ.
VISIBILITY_OUTLASTING_FUNCTION_S = 5
MAX_RECEIVES = 2
TINY_HANDLER = textwrap.dedent('''
    import json, os, time

    import boto3

    # Built at import, in the init phase the timeout does not count, as the consumer builds its clients: built in
    # the invocation, a redelivery's cold client on a loaded machine outlasted the 2 s function, was timed out,
    # and its message came back a third time to the DLQ.
    SES = boto3.client("sesv2")

    def handler(event, context):
        failures = []
        with open(os.environ["TINY_LOG"], "a") as log:
            for record in event["Records"]:
                log.write(json.dumps({
                    "body": record["body"], "at": time.time(),
                    "count": int(record["attributes"]["ApproximateReceiveCount"]),
                    "remaining_ms": context.get_remaining_time_in_millis(),
                    "function_name": os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
                    "task_root": os.environ.get("LAMBDA_TASK_ROOT"),
                }) + "\\n")
        for record in event["Records"]:
            if record["body"] == "send":
                try:  # the call is what a fault watches; whether SES accepts it does not matter here
                    SES.send_email(
                        FromEmailAddress="a@example.com", Destination={"ToAddresses": ["b@example.com"]},
                        Content={"Simple": {"Subject": {"Data": "s"}, "Body": {"Text": {"Data": "t"}}}})
                except Exception:
                    pass
            if record["body"] == "raise":
                raise RuntimeError("boom")
            if record["body"] == "sleep":
                time.sleep(30)
            if record["body"] == "fail":
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}
''')


@pytest.fixture
def tiny(aws, tmp_path: Path, request):
    visibility_s = getattr(request, "param", VISIBILITY_S)
    code = tmp_path / "code"
    code.mkdir()
    (code / "tiny.py").write_text(TINY_HANDLER)
    log = tmp_path / "deliveries.jsonl"
    sqs = boto3.client("sqs")
    dlq_url = sqs.create_queue(QueueName="tiny-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": MAX_RECEIVES})
    url = sqs.create_queue(
        QueueName="tiny", Attributes={"VisibilityTimeout": str(visibility_s), "RedrivePolicy": redrive}
    )["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    function = FunctionSpec("tiny", "tiny.handler", code, {"TINY_LOG": str(log)}, timeout_s=FUNCTION_TIMEOUT_S)
    source = EventSourceSpec(url, arn, batch_size=10, max_concurrency=1)

    def run(*bodies: str, faults: FaultPlan | None = None) -> tuple[EventSourceRunner, list[dict]]:
        for body in bodies:
            sqs.send_message(QueueUrl=url, MessageBody=body)
        with EventSourceRunner(function, source, aws.environment, faults=faults) as runner:
            assert runner.run_until_drained(bound_s=60), "the queue did not drain"
        deliveries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return runner, deliveries

    def dead_letters() -> list[str]:
        messages = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10).get("Messages", [])
        return sorted(m["Body"] for m in messages)

    return run, dead_letters


def test_succeeded_records_are_deleted_after_one_delivery(tiny):
    run, dead_letters = tiny
    runner, deliveries = run("a", "b", "c")
    assert sorted(d["body"] for d in deliveries) == ["a", "b", "c"]
    assert runner.stats.records_deleted == 3
    assert dead_letters() == []


def test_batch_item_failures_come_back_after_the_visibility_timeout_then_go_to_the_dlq(tiny):
    run, dead_letters = tiny
    _, deliveries = run("ok", "fail")
    failing = [d for d in deliveries if d["body"] == "fail"]
    assert [d["count"] for d in failing] == [1, 2]
    assert failing[1]["at"] - failing[0]["at"] >= VISIBILITY_S * 0.9
    assert [d["body"] for d in deliveries].count("ok") == 1
    assert dead_letters() == ["fail"]


def test_a_function_error_leaves_the_whole_batch_for_redelivery(tiny):
    run, dead_letters = tiny
    runner, deliveries = run("raise")
    assert [d["count"] for d in deliveries] == [1, 2]
    assert runner.stats.function_errors == 2
    assert dead_letters() == ["raise"]


def test_the_handler_gets_a_real_deadline_and_is_killed_when_it_passes(tiny):
    run, dead_letters = tiny
    runner, deliveries = run("sleep")
    assert 1000 < deliveries[0]["remaining_ms"] <= 2000
    assert runner.stats.timeouts == 2
    assert dead_letters() == ["sleep"]


@pytest.mark.parametrize("tiny", [VISIBILITY_OUTLASTING_FUNCTION_S], indirect=True)
def test_a_forced_fault_its_invocation_never_reached_is_armed_again_until_it_fires(tiny):
    run, dead_letters = tiny
    faults = FaultPlan(0.0, seed=1, kinds=("before_send",), forced=1)
    runner, _ = run("skip", faults=faults)  # no SendEmail: the forced kill is not spent
    assert runner.stats.faults_armed == 1 and runner.stats.workers_killed == 0
    runner, deliveries = run("send", faults=faults)
    assert runner.stats.workers_killed == 1  # killed at its first SendEmail, then sent on redelivery
    assert [d["count"] for d in deliveries if d["body"] == "send"] == [1, 2]
    assert dead_letters() == []


def test_the_handler_runs_with_lambdas_reserved_variables(tiny):
    """As in a Lambda execution environment: the runtime tells it runs in one, and builds its clients at import."""
    run, _ = tiny
    _, deliveries = run("ok")
    assert deliveries[0]["function_name"] == "tiny" and deliveries[0]["task_root"].endswith("code")


def test_a_handlers_parts_are_built_at_import_in_an_execution_environment_and_on_first_use_elsewhere(monkeypatch):
    from sendonce_runtime.shell import FUNCTION_NAME_VARIABLE, Once

    builds: list[str] = []
    monkeypatch.delenv(FUNCTION_NAME_VARIABLE, raising=False)
    lazy = Once(lambda: builds.append("lazy") or "built")
    assert builds == [] and lazy.get() == "built" and builds == ["lazy"]
    monkeypatch.setenv(FUNCTION_NAME_VARIABLE, "consumer")
    Once(lambda: builds.append("init"))
    assert builds == ["lazy", "init"]

    def broken() -> str:
        raise RuntimeError("no table name")

    failing = Once(broken)  # an init that fails is tried again by the first invocation, which fails with it
    with pytest.raises(RuntimeError, match="no table name"):
        failing.get()


def test_partial_batch_response_rules():
    ids = ["m1", "m2", "m3"]

    def returned(result):
        return succeeded_ids(Invocation(Ending.RETURNED, result=result), ids, True)

    assert returned(None) == ids
    assert returned({}) == ids
    assert returned({"batchItemFailures": []}) == ids
    assert returned({"batchItemFailures": [{"itemIdentifier": "m2"}]}) == ["m1", "m3"]
    assert returned({"batchItemFailures": [{"itemIdentifier": ""}]}) == []
    assert returned({"batchItemFailures": [{"itemIdentifier": None}]}) == []
    assert returned({"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]}) == []
    assert returned({"batchItemFailures": [{"id": "m2"}]}) == []
    assert returned("not a response") == []
    for ending in (Ending.RAISED, Ending.KILLED, Ending.TIMED_OUT):
        assert succeeded_ids(Invocation(ending), ids, True) == []
    assert succeeded_ids(Invocation(Ending.RETURNED, result={"batchItemFailures": [{"itemIdentifier": "m1"}]}),
                         ids, False) == ids
