"""A slow or throttled DynamoDB or SQS delays a job, never loses, doubles or dead-letters it, and never
multiplies its messages: an answer lost on the way back is treated as possibly done, everywhere.

The consumer talks to DynamoDB and SQS through a proxy (``slow_aws``) that answers late (after carrying the
request out) or refuses; the jobs are real SQS messages, received with their receipt handles as Lambda hands
them over; emails are counted in the emulator's SES.
"""

from __future__ import annotations

import io
import json

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault
from slow_aws import MAX_RECEIVES, consumer

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_local.emulator.slow_services import LATE, Rule


def lines(log: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in log.getvalue().splitlines()]


def attribute(record: dict, name: str) -> str | None:
    value = record["messageAttributes"].get(name)
    return value["stringValue"] if value else None


def test_dynamodb_throttling_before_the_send_postpones_the_job_without_a_claim_or_a_receive(pipeline, slow, jobs):
    jobs.enqueue(job("receipt:lt1:u1"))
    [record] = jobs.receive()
    built, log = consumer(pipeline, slow, jobs, FakeClock())
    slow.fault(Rule("dynamodb", None, "ProvisionedThroughputExceededException"))
    response = built.handle(event(record), FakeContext(FakeClock()))
    jobs.acknowledge(response, record)

    assert response == {"batchItemFailures": []}  # acknowledged: no receive spent
    [line] = lines(log)
    assert line["outcome"] == "ledger_throttled" and line["LedgerThrottles"] == 1
    assert 1 <= line["postponedSeconds"] <= 2
    assert pipeline.ledger_item("receipt:lt1:u1") is None and pipeline.emails_for("receipt:lt1:u1") == 0

    slow.clear()
    [copy] = jobs.receive()
    assert attribute(copy, "sendonce.postponements") == "1"  # the backoff grows, as for SES's throttling
    assert built.handle(event(copy), FakeContext(FakeClock())) == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:lt1:u1") == 1 and pipeline.dead_letters() == []


@pytest.mark.parametrize("policy", list(DeliveryPolicy)[:2], ids=lambda p: p.value)
def test_a_claim_whose_answer_was_lost_is_taken_over_by_its_own_copy_at_once(pipeline, slow, jobs, policy):
    clock = FakeClock()
    jobs.enqueue(job("receipt:lt2:u1"))
    [record] = jobs.receive()
    built, log = consumer(pipeline, slow, jobs, clock, delivery=policy, evidence_grace_ms=60_000)
    # The claim is written but its answer lost, and DynamoDB throttles the consumer's taking it back.
    slow.fault(Rule("dynamodb", "PutItem", LATE), Rule("dynamodb", "DeleteItem", "ThrottlingException"))
    response = built.handle(event(record), FakeContext(clock))
    jobs.acknowledge(response, record)

    assert response == {"batchItemFailures": []}, log.getvalue()
    assert lines(log)[0]["outcome"] == "ledger_unavailable" and lines(log)[0]["LedgerErrors"] == 1
    phantom = pipeline.ledger_item("receipt:lt2:u1")
    assert phantom is not None and phantom["status"]["S"] == "IN_FLIGHT"  # the claim was written; its answer lost

    slow.clear()
    [copy] = jobs.receive()
    assert phantom["owner"]["S"] in attribute(copy, "sendonce.unsentClaim").split()
    # Not a dead worker's claim: no wait for its lease and SES's grace period, and never UNKNOWN.
    assert built.handle(event(copy), FakeContext(clock)) == {"batchItemFailures": []}, log.getvalue()
    assert lines(log)[-1]["outcome"] == "sent"
    assert pipeline.status("receipt:lt2:u1") == "SENT" and pipeline.emails_for("receipt:lt2:u1") == 1


def test_a_claim_whose_answer_was_lost_is_taken_back_so_no_other_copy_waits_for_it(pipeline, slow, jobs):
    clock = FakeClock()
    built, log = consumer(pipeline, slow, jobs, clock, delivery=DeliveryPolicy.NEVER_RESEND,
                          evidence_grace_ms=60_000)
    slow.fault(Rule("dynamodb", "PutItem", LATE))
    body = job("receipt:lt8:u1")
    assert built.handle(event(sqs_record(body)), FakeContext(clock)) == {"batchItemFailures": []}
    assert lines(log)[0]["outcome"] == "ledger_unavailable"
    assert pipeline.ledger_item("receipt:lt8:u1") is None  # written, then taken back
    slow.clear()
    # Another copy of the job (enqueued twice by its producer) sends at once: no phantom claim in its way.
    assert built.handle(event(sqs_record(body)), FakeContext(clock)) == {"batchItemFailures": []}
    assert lines(log)[-1]["outcome"] == "sent" and pipeline.emails_for("receipt:lt8:u1") == 1


def test_a_real_ledger_failure_spends_receives_and_on_the_last_is_dead_lettered_with_its_reason(
        pipeline, slow, jobs):
    built, log = consumer(pipeline, slow, jobs)
    slow.fault(Rule("dynamodb", None, "AccessDeniedException"))
    record = sqs_record(job("receipt:lt3:u1"), receive_count=MAX_RECEIVES)
    assert built.handle(event(record), FakeContext(FakeClock())) == {"batchItemFailures": []}
    [dead] = pipeline.dead_letters()
    assert dead["MessageAttributes"]["sendonce.reasonCode"]["StringValue"] == "max-receives"
    assert "ledger_failed: ClientError" in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]
    assert lines(log)[0]["outcome"] == "receives_exhausted"


def test_a_copy_whose_answer_was_lost_keeps_the_original_out_of_sight_until_the_copy_deletes_it(
        pipeline, ses_faults, slow, jobs):
    jobs.enqueue(job("receipt:lt4:u1"))
    [original] = jobs.receive()
    built, log = consumer(pipeline, slow, jobs, FakeClock())
    ses_faults.script(Fault.THROTTLE)
    slow.fault(Rule("sqs", "SendMessageBatch", LATE))  # a single job's copy is a batch of one
    response = built.handle(event(original), FakeContext(FakeClock()))
    jobs.acknowledge(response, original)

    assert failed_ids(response) == {original["messageId"]}  # kept: the copy may not exist
    assert "the delayed copy's answer was lost" in lines(log)[0]["reason"]
    assert jobs.depth() == 2  # the copy (it was enqueued) and the original, out of sight

    slow.clear()
    [copy] = jobs.receive()  # the copy comes back; the original stays out of sight
    assert attribute(copy, "sendonce.supersedes") == original["receiptHandle"]
    response = built.handle(event(copy), FakeContext(FakeClock()))
    jobs.acknowledge(response, copy)
    assert response == {"batchItemFailures": []}
    assert jobs.depth() == 0  # the copy deleted the original it replaced
    assert pipeline.emails_for("receipt:lt4:u1") == 1


def test_an_original_whose_copy_answer_was_lost_is_held_then_though_it_needed_no_hold_before(
        pipeline, ses_faults, slow, jobs):
    """A long function and a short delay: the copy will arrive long before its original is visible again, so the
    original is not held first. When the copy's answer is lost, it is held then, so it never comes back beside the
    copy that may exist (here it would be visible again at once, as its receive left it)."""
    jobs.enqueue(job("receipt:lt6:u1"))
    [original] = jobs.receive(visibility_s=0)
    built, _ = consumer(pipeline, slow, jobs, FakeClock())
    ses_faults.script(Fault.THROTTLE)
    slow.fault(Rule("sqs", "SendMessageBatch", LATE))
    assert failed_ids(built.handle(event(original), FakeContext(FakeClock()))) == {original["messageId"]}
    slow.clear()
    [copy] = jobs.receive()  # the copy comes back first; its original stays out of sight
    assert copy["messageId"] != original["messageId"]
    assert attribute(copy, "sendonce.supersedes") == original["receiptHandle"]


@pytest.mark.parametrize("budget_ms", [30_000, 3_000], ids=["long-function", "short-function-held"])
def test_an_original_whose_acknowledgement_was_lost_is_deleted_by_its_copy(pipeline, ses_faults, slow, jobs,
                                                                            budget_ms):
    jobs.enqueue(job("receipt:lt5:u1"))
    [original] = jobs.receive()
    built, _ = consumer(pipeline, slow, jobs, FakeClock())
    ses_faults.script(Fault.THROTTLE)
    response = built.handle(event(original), FakeContext(FakeClock(), budget_ms=budget_ms))
    assert response == {"batchItemFailures": []}
    # The invocation is killed between the copy and the acknowledgement: Lambda never deletes the original.
    assert jobs.depth() == 2
    [copy] = jobs.receive()
    response = built.handle(event(copy), FakeContext(FakeClock()))
    jobs.acknowledge(response, copy)
    assert jobs.depth() == 0 and pipeline.emails_for("receipt:lt5:u1") == 1


@pytest.mark.parametrize("lost", [Rule("sqs", "SendMessage", LATE), Rule("sqs", "SendMessage", "InternalError", 500)],
                         ids=["carried-out-answered-late", "answered-5xx"])
@pytest.mark.parametrize("kind", ["malformed", "refused-by-ses"])
def test_a_dead_letter_whose_answer_was_lost_keeps_the_job_until_the_dlq_surely_holds_it(
        pipeline, ses_faults, slow, jobs, lost, kind):
    """A dead letter SQS may never have stored is not done: the job comes back and is dead-lettered again. A second
    entry in the DLQ is harmless (a redrive dedupes); a job acknowledged with none would be lost."""
    built, log = consumer(pipeline, slow, jobs)
    if kind == "malformed":
        jobs.sqs.send_message(QueueUrl=jobs.url, MessageBody='{"dedupeKey": "receipt:broken"')
    else:
        jobs.enqueue(job("receipt:lt9:u1"))
        ses_faults.script(Fault.REJECT, Fault.REJECT)
    [record] = jobs.receive(visibility_s=2)
    slow.fault(lost)
    response = built.handle(event(record), FakeContext(FakeClock()))
    jobs.acknowledge(response, record)
    assert failed_ids(response) == {record["messageId"]}, "acknowledged although the DLQ may not hold it"
    assert lines(log)[0]["outcome"] == "dead_letter_failed"

    slow.clear()
    [again] = jobs.receive()  # back after its visibility timeout
    assert again["messageId"] == record["messageId"]
    response = built.handle(event(again), FakeContext(FakeClock()))
    jobs.acknowledge(response, again)
    assert response == {"batchItemFailures": []} and jobs.depth() == 0
    reason_code = "invalid-message" if kind == "malformed" else "ses-refused"
    dead = pipeline.dead_letters()  # twice when the lost answer's send was carried out, else once: never lost
    assert len(dead) == (2 if lost.fault == LATE else 1)
    assert {d["MessageAttributes"]["sendonce.reasonCode"]["StringValue"] for d in dead} == {reason_code}
    assert pipeline.emails_for("receipt:lt9:u1") == 0


def test_a_takeover_that_ses_throttles_keeps_the_record_with_the_first_emails_history(
        pipeline, ses_faults, slow, jobs):
    clock = FakeClock()
    built, log = consumer(pipeline, slow, jobs, clock)
    body = job("receipt:lt6:u1")
    from sendonce_contract.message import parse_job

    parsed = parse_job(json.dumps(body), "m")
    built.processor._ledger.claim(parsed.dedupe_key, "dead-worker", clock.now_ms() - 1, parsed.payload_hash)
    ses_faults.script(Fault.THROTTLE)
    assert built.handle(event(sqs_record(body)), FakeContext(clock)) == {"batchItemFailures": []}
    assert lines(log)[0]["outcome"] == "throttled"
    kept = pipeline.ledger_item("receipt:lt6:u1")
    # Kept, not deleted: a late event for the first email still finds it (and would show a double).
    assert kept is not None and kept["attempts"]["N"] == "2" and kept["leaseExpiresAt"]["N"] == "0"
    # Its lease ended: the next delivery takes it over at once and sends.
    assert built.handle(event(sqs_record(body)), FakeContext(clock)) == {"batchItemFailures": []}
    assert lines(log)[-1]["outcome"] == "sent" and pipeline.ledger_item("receipt:lt6:u1")["attempts"]["N"] == "3"
    assert pipeline.emails_for("receipt:lt6:u1") == 1


@pytest.mark.parametrize("policy", list(DeliveryPolicy)[:2], ids=lambda p: p.value)
def test_an_unrecorded_send_travels_with_a_copy_so_no_other_copy_sends_it_again(pipeline, slow, jobs, policy):
    clock = FakeClock()
    built, log = consumer(pipeline, slow, jobs, clock, delivery=policy)  # no SES events: they are lost
    body = job("receipt:lt7:u1")
    jobs.enqueue(body)
    [original] = jobs.receive()
    slow.fault(Rule("dynamodb", "UpdateItem", "ProvisionedThroughputExceededException"))
    response = built.handle(event(original), FakeContext(clock))
    jobs.acknowledge(response, original)
    assert response == {"batchItemFailures": []} and lines(log)[0]["outcome"] == "sent_unrecorded"
    assert pipeline.status("receipt:lt7:u1") == "IN_FLIGHT"

    slow.clear()
    [copy] = jobs.receive()
    response = built.handle(event(copy), FakeContext(clock))
    jobs.acknowledge(response, copy)
    assert pipeline.status("receipt:lt7:u1") == "SENT"  # the copy wrote what SES had accepted
    # Another copy of the job, long after the first worker's lease: a duplicate, not a dead worker's send.
    clock.advance(3_600_000)
    assert built.handle(event(sqs_record(body)), FakeContext(clock)) == {"batchItemFailures": []}
    assert lines(log)[-1]["outcome"] == "duplicate"
    assert jobs.depth() == 0 and pipeline.emails_for("receipt:lt7:u1") == 1
