"""The consumer's metrics, parsed back from its log lines as CloudWatch's Embedded Metric Format reads them."""

from __future__ import annotations

import io
import json

from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.message import parse_job
from sendonce_runtime.outcome_log import OutcomeLog


def hash_of(key: str) -> str:
    return parse_job(json.dumps(job(key)), "m").payload_hash


def emf_metrics(log_text: str) -> list[dict[str, float]]:
    """What CloudWatch would record from each line: the declared metrics and their values, by the spec."""
    found = []
    for line in log_text.splitlines():
        document = json.loads(line)
        [directive] = document["_aws"]["CloudWatchMetrics"]
        assert directive["Namespace"] == "sendonce"
        assert directive["Dimensions"] == [["Pipeline"]] and document["Pipeline"] == "Shop/Receipts"
        assert isinstance(document["_aws"]["Timestamp"], int)
        found.append({m["Name"]: document[m["Name"]] for m in directive["Metrics"]})
    return found


def test_each_record_emits_its_outcome_metric_and_latency(pipeline, ses_faults):
    log = io.StringIO()
    consumer = pipeline.consumer(parallelism=1, delivery=DeliveryPolicy.NEVER_RESEND)
    consumer.log = OutcomeLog(log, pipeline="Shop/Receipts")
    ses_faults.script(Fault.PASS, Fault.THROTTLE, Fault.REJECT)
    clock = FakeClock()
    consumer.processor._ledger.claim("k:unknown", "dead", clock.now_ms() - 1, hash_of("k:unknown"))
    consumer.processor._ledger.claim("k:busy", "alive", clock.now_ms() + 60_000, hash_of("k:busy"))
    records = [
        sqs_record(job("k:sent")), sqs_record(job("k:throttled")), sqs_record(job("k:refused")),
        sqs_record(job("k:sent")), sqs_record(job("k:sent", text="changed")), sqs_record("{bad"),
        sqs_record(job("k:unknown")), sqs_record(job("k:busy")),
    ]
    consumer.handle(event(*records), FakeContext(clock))

    metrics = emf_metrics(log.getvalue())
    outcome_names = [sorted(set(m) - {"Records", "RecordLatency"}) for m in metrics]
    assert outcome_names == [
        ["EmailsSent"], ["SesThrottles"], ["SesRefusals"], ["DuplicatesSkipped"],
        ["DuplicatesSkipped", "KeyConflicts"], ["PoisonMessages"], ["UnknownRecords"], ["InFlightRetries"],
    ]
    assert all(m["Records"] == 1 and m["RecordLatency"] >= 0 for m in metrics)


def test_without_a_pipeline_name_the_lines_carry_no_metrics(pipeline):
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    consumer.handle(event(sqs_record(job("k:plain"))), FakeContext(FakeClock()))
    assert "_aws" not in json.loads(log.getvalue())
