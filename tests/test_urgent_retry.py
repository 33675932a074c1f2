"""The urgent lane's consumer tries a send SES throttled again in its invocation: bulk lends itself the urgent share
while the urgent lane's work item says it is idle and reads it once a second, so the urgent lane's first sends
after idling may meet SES's whole rate taken, until bulk reads the item they wrote and gives the share back.
Against the emulator's SES behind a proxy that throttles as SES does."""

from __future__ import annotations

import json

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault
from slow_aws import Jobs

from sendonce_contract.priority import Priority
from sendonce_contract.schema import CopyAttribute
from sendonce_runtime.lane_share import URGENT_RETRY_PATIENCE_S, URGENT_RETRY_PAUSE_S


@pytest.mark.parametrize("throttles", [1, 3])
def test_an_urgent_send_ses_throttles_is_tried_again_in_its_invocation(pipeline, ses_faults, throttles):
    """SES refused it (nothing sent), bulk will read the lane's work item and give the share back: a quarter of a
    second later it goes, one email, no delayed copy."""
    ses_faults.script(*[Fault.THROTTLE] * throttles)
    consumer = pipeline.consumer(parallelism=1, lane=Priority.URGENT.value)
    record = sqs_record(job("urgent:throttled"))
    assert consumer.handle(event(record), FakeContext(FakeClock(), budget_ms=30_000)) == {"batchItemFailures": []}
    assert pipeline.emails_for("urgent:throttled") == 1  # from the emulator's SES
    assert ses_faults.send_requests == throttles + 1


def test_an_urgent_send_throttled_past_the_retry_s_patience_waits_as_a_delayed_copy(pipeline, ses_faults):
    tries = int(URGENT_RETRY_PATIENCE_S / URGENT_RETRY_PAUSE_S) + 1
    ses_faults.script(*[Fault.THROTTLE] * (tries + 5))
    jobs = Jobs("urgent-jobs")
    consumer = pipeline.consumer(parallelism=1, lane=Priority.URGENT.value, queue_url=jobs.url, max_receive_count=5)
    jobs.enqueue(job("urgent:still-throttled"))
    [record] = jobs.receive()
    response = consumer.handle(event(record), FakeContext(FakeClock(), budget_ms=30_000))
    jobs.acknowledge(response, record)
    assert ses_faults.send_requests == tries and pipeline.emails_for("urgent:still-throttled") == 0
    assert pipeline.ledger_item("urgent:still-throttled") is None  # its claim released: a later try sends it
    assert_waits_as_a_delayed_copy(jobs, response, "urgent:still-throttled")


def test_an_urgent_retry_never_outlives_the_record_s_budget(pipeline, ses_faults):
    """With too little of the invocation left for another try and its send, the job goes back at once."""
    ses_faults.script(Fault.THROTTLE)
    settings = pipeline.settings(lane=Priority.URGENT.value)
    consumer = pipeline.consumer(parallelism=1, lane=Priority.URGENT.value)
    budget_ms = settings.budget.record_budget_ms + int(URGENT_RETRY_PAUSE_S * 1000) // 2
    record = sqs_record(job("urgent:no-time"))
    response = consumer.handle(event(record), FakeContext(FakeClock(), budget_ms=budget_ms + 50))
    assert failed_ids(response) == {record["messageId"]} and ses_faults.send_requests == 1


def test_a_bulk_send_ses_throttles_waits_as_a_delayed_copy_as_before(pipeline, ses_faults):
    ses_faults.script(Fault.THROTTLE)
    jobs = Jobs("bulk-jobs")
    consumer = pipeline.consumer(parallelism=1, lane=Priority.BULK.value, queue_url=jobs.url, max_receive_count=5)
    jobs.enqueue(job("bulk:throttled"))
    [record] = jobs.receive()
    response = consumer.handle(event(record), FakeContext(FakeClock(), budget_ms=30_000))
    jobs.acknowledge(response, record)
    assert ses_faults.send_requests == 1
    assert_waits_as_a_delayed_copy(jobs, response, "bulk:throttled")


def assert_waits_as_a_delayed_copy(jobs: Jobs, response: dict, key: str) -> None:
    """The original acknowledged and one delayed copy of the job in its place: SQS's own counts, then the copy."""
    assert response == {"batchItemFailures": []}  # not handed back: a receive is not spent on waiting
    assert jobs.depth() == 1  # the copy alone: the original is deleted
    [copy] = jobs.receive(wait_s=30)  # due within a throttle's first delay
    assert json.loads(copy["body"])["dedupeKey"] == key and copy["attributes"]["ApproximateReceiveCount"] == "1"
    assert copy["messageAttributes"][CopyAttribute.POSTPONEMENTS]["stringValue"] == "1"  # a copy, its first wait
