"""`sendonce latency` against the emulator, where the local SES publisher plays SES's events with a known delay:
the command enqueues probes through the pipeline and reports, from the ledger, the delay SES's events took."""

from __future__ import annotations

import json
import threading

import boto3
import pytest
from consumer_harness import event, sqs_record

from sendonce_local.emulator.ses_publisher import EventFaults
from sendonce_ops.cli import main as sendonce
from sendonce_ops.latency import SIMULATOR_SUCCESS, percentile
from sendonce_testing.lambda_events import LambdaContext

EVENT_DELAY_S = 1.5  # what the publisher plays as EventBridge's latency for every event


class RunningPipeline:
    """The deployed pipeline played in threads: the SQS event source feeding the consumer, and SES's events
    reaching the recorder through the local publisher."""

    def __init__(self, pipeline, queue_url: str) -> None:
        self._consumer = pipeline.consumer(queue_url=queue_url, **pipeline.evidence_settings())
        self._publisher = pipeline.ses_events(faults=EventFaults(delay_s=EVENT_DELAY_S, outcome_delay_s=0.5))
        self._queue_url = queue_url
        self._sqs = boto3.client("sqs")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> RunningPipeline:
        self._publisher.start(interval_s=0.05)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._publisher.stop()

    def _poll(self) -> None:
        while not self._stop.is_set():
            messages = self._sqs.receive_message(QueueUrl=self._queue_url, MaxNumberOfMessages=10,
                                                 WaitTimeSeconds=1).get("Messages", [])
            for message in messages:
                response = self._consumer.handle(event(sqs_record(message["Body"])), LambdaContext())
                if not response["batchItemFailures"]:
                    self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"])


@pytest.fixture
def jobs(aws) -> str:
    return str(boto3.client("sqs").create_queue(QueueName="jobs")["QueueUrl"])


def test_latency_reports_the_delay_of_ses_events_from_send_to_the_ledger(pipeline, jobs, capsys):
    where = ["--table", pipeline.table_name, "--queue", jobs]
    with RunningPipeline(pipeline, jobs):
        code = sendonce([*where, "--json", "latency", "--from", "probe@example.com", "--count", "12",
                         "--timeout", "60"])
    report = json.loads(capsys.readouterr().out)

    assert code == 0
    assert report["probes"] == report["measured"] == 12 and report["missing"] == []
    # What was played, plus the publisher's and the recorder's own few tens of milliseconds.
    assert EVENT_DELAY_S <= report["p50_s"] <= report["p99_s"] <= report["max_s"] < EVENT_DELAY_S + 2
    sent = [m for m in pipeline.aws.sent_emails() if SIMULATOR_SUCCESS in str(getattr(m, "destinations", ""))]
    assert len(sent) == 12  # one email per probe, to SES's mailbox simulator


def test_the_report_weighs_the_delays_against_the_pipelines_own_grace_period_or_says_it_used_the_default():
    from sendonce_ops.latency import LatencyReport, describe

    report = LatencyReport(probes=2, measured_s=(1.0, 2.0), missing=())
    assert "this pipeline's evidence_grace_period (10 s) should stay well above the p99 and the max: 5x the max" in (
        describe(report, grace_s=10))
    assert "evidence_grace_period (the default 300 s; pass --stack to weigh yours)" in describe(report)
    assert "150x the max" in describe(report)


def test_latency_without_events_says_so_and_fails(pipeline, jobs, capsys):
    code = sendonce(["--table", pipeline.table_name, "--queue", jobs, "latency", "--from", "probe@example.com",
                     "--count", "2", "--timeout", "1"])
    out = capsys.readouterr().out
    assert code == 1 and "no SES event reached the ledger for any of 2 probes" in out


def test_latency_refuses_a_bad_sender_in_one_line(pipeline, jobs, capsys):
    code = sendonce(["--table", pipeline.table_name, "--queue", jobs, "latency", "--from", "not an address"])
    [line] = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "from 'not an address' is not a valid email address" in line


def test_latency_refuses_a_count_below_one(pipeline, jobs, capsys):
    with pytest.raises(SystemExit) as exit_:
        sendonce(["--table", pipeline.table_name, "--queue", jobs, "latency", "--from", "p@example.com", "--count",
                  "0"])
    assert exit_.value.code == 2 and "'0' is not a positive whole number" in capsys.readouterr().err


def test_percentiles_are_nearest_rank():
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 99) == 99.0 and percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
