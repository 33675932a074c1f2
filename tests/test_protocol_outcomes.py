"""One test per row of the consumer's outcome table (README: Guarantees), counted in what SES accepted."""

from __future__ import annotations

import hashlib
import io
import json

import pytest
from consumer_harness import FakeClock, FakeContext, event, failed_ids, job, sqs_record
from ses_fault_proxy import Fault

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_runtime.outcome_log import OutcomeLog

LEASE_EXPIRED_MS = 30_000 + 10_000 + 1  # past the invocation's deadline plus the lease margin
NEVER = DeliveryPolicy.NEVER_RESEND  # with SES events off (the former at-most-once), what these tests are about

# Every guarantee here holds whether a batch's records run in turn or ten at once.
pytestmark = pytest.mark.usefixtures("at_both_parallelisms")


def test_first_delivery_sends_once_and_records_sent(pipeline):
    consumer = pipeline.consumer()
    response = consumer.handle(event(sqs_record(job("receipt:1:u1"))), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:1:u1") == 1
    item = pipeline.ledger_item("receipt:1:u1")
    assert item["status"]["S"] == "SENT"
    assert item["sesMessageId"]["S"]
    assert int(item["expiresAt"]["N"]) > int(item["sentAt"]["N"]) // 1000


def test_same_message_delivered_twice_sends_once(pipeline):
    consumer, record = pipeline.consumer(), sqs_record(job("receipt:2:u1"))
    consumer.handle(event(record), FakeContext(FakeClock()))
    redelivered = dict(record, attributes={"ApproximateReceiveCount": "2"})
    response = consumer.handle(event(redelivered), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:2:u1") == 1


def test_job_reenqueued_with_new_message_id_sends_once(pipeline):
    consumer = pipeline.consumer()
    consumer.handle(event(sqs_record(job("receipt:3:u1"))), FakeContext(FakeClock()))
    response = consumer.handle(event(sqs_record(job("receipt:3:u1"))), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:3:u1") == 1


def test_duplicates_inside_one_batch_send_once(pipeline):
    records = [sqs_record(job("receipt:4:u1")) for _ in range(4)]
    consumer = pipeline.consumer(parallelism=1)
    consumer.handle(event(*records), FakeContext(FakeClock()))
    assert pipeline.emails_for("receipt:4:u1") == 1


def test_parallel_duplicates_inside_one_batch_send_once_and_retry_the_rest(pipeline):
    records = [sqs_record(job("receipt:5:u1")) for _ in range(6)]
    consumer = pipeline.consumer(parallelism=6)
    response = consumer.handle(event(*records), FakeContext(FakeClock()))
    # The copies that met a live lease are retried later; by then the key is SENT.
    retry = [r for r in records if r["messageId"] in failed_ids(response)]
    if retry:
        assert consumer.handle(event(*retry), FakeContext(FakeClock())) == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:5:u1") == 1


def test_key_recorded_unknown_is_never_sent(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock).processor._ledger.claim("receipt:6:u1", "dead-worker", clock.now_ms() - 1, "h")
    pipeline.consumer(clock, delivery=NEVER).handle(event(sqs_record(job("receipt:6:u1"))), FakeContext(clock))
    assert pipeline.status("receipt:6:u1") == "UNKNOWN"

    for policy in DeliveryPolicy:
        response = pipeline.consumer(clock, delivery=policy).handle(
            event(sqs_record(job("receipt:6:u1"))), FakeContext(clock)
        )
        assert response == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:6:u1") == 0


def test_in_flight_with_live_lease_is_retried_later_without_sending(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock).processor._ledger.claim("receipt:7:u1", "busy-worker", clock.now_ms() + 60_000, "h")
    record = sqs_record(job("receipt:7:u1"))

    response = pipeline.consumer(clock).handle(event(record), FakeContext(clock))

    assert failed_ids(response) == {record["messageId"]}
    assert pipeline.emails_for("receipt:7:u1") == 0
    assert pipeline.status("receipt:7:u1") == "IN_FLIGHT"


def test_expired_lease_at_most_once_marks_unknown_and_does_not_send(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock).processor._ledger.claim("receipt:8:u1", "dead-worker", clock.now_ms() - 1, "h")
    consumer = pipeline.consumer(clock, delivery=NEVER)
    response = consumer.handle(event(sqs_record(job("receipt:8:u1"))), FakeContext(clock))

    assert response == {"batchItemFailures": []}
    assert pipeline.status("receipt:8:u1") == "UNKNOWN"
    assert pipeline.emails_for("receipt:8:u1") == 0


def test_expired_lease_at_least_once_takes_over_and_sends(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock).processor._ledger.claim("receipt:9:u1", "dead-worker", clock.now_ms() - 1, "h")
    consumer = pipeline.consumer(clock, delivery=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE)
    response = consumer.handle(event(sqs_record(job("receipt:9:u1"))), FakeContext(clock))

    assert response == {"batchItemFailures": []}
    item = pipeline.ledger_item("receipt:9:u1")
    assert item["status"]["S"] == "SENT"
    assert item["attempts"]["N"] == "2"
    assert pipeline.emails_for("receipt:9:u1") == 1


def test_message_delivery_field_overrides_the_deployed_policy(pipeline):
    clock = FakeClock()
    pipeline.consumer(clock).processor._ledger.claim("receipt:10:u1", "dead-worker", clock.now_ms() - 1, "h")
    body = job("receipt:10:u1", delivery="resend-without-evidence")
    pipeline.consumer(clock, delivery=DeliveryPolicy.NEVER_RESEND).handle(event(sqs_record(body)), FakeContext(clock))
    assert pipeline.emails_for("receipt:10:u1") == 1


def test_claim_retried_by_the_sdk_finds_its_own_owner_and_wins(pipeline):
    clock = FakeClock()
    ledger = pipeline.consumer(clock).processor._ledger
    first = ledger.claim("receipt:11:u1", "owner-a", clock.now_ms() + 60_000, "h")
    retried = ledger.claim("receipt:11:u1", "owner-a", clock.now_ms() + 60_000, "h")
    other = ledger.claim("receipt:11:u1", "owner-b", clock.now_ms() + 60_000, "h")

    assert first.won and retried.won
    assert not other.won and other.existing.owner == "owner-a"


def test_late_worker_cannot_complete_or_release_a_newer_claim(pipeline):
    clock = FakeClock()
    ledger = pipeline.consumer(clock).processor._ledger
    ledger.claim("receipt:12:u1", "late-worker", clock.now_ms() - 1, "h")
    stale = ledger.claim("receipt:12:u1", "new-worker", clock.now_ms() + 60_000, "h").existing
    assert ledger.take_over(stale, "new-worker", clock.now_ms() + 60_000, "h").won

    assert ledger.mark_sent("receipt:12:u1", "late-worker", "ses-late").recorded is False
    ledger.release("receipt:12:u1", "late-worker")
    item = pipeline.ledger_item("receipt:12:u1")
    assert item["owner"]["S"] == "new-worker" and item["status"]["S"] == "IN_FLIGHT"


def test_expired_record_counts_as_absent_though_ttl_has_not_deleted_it(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, dedupe_ttl_s=60)
    consumer.handle(event(sqs_record(job("receipt:13:u1"))), FakeContext(clock))
    clock.advance(61_000)
    consumer.handle(event(sqs_record(job("receipt:13:u1"))), FakeContext(clock))
    assert pipeline.emails_for("receipt:13:u1") == 2


@pytest.mark.parametrize("fault", [Fault.THROTTLE, Fault.SENDING_PAUSED])
def test_retryable_refusal_releases_the_claim_and_retries_later(pipeline, ses_faults, fault):
    ses_faults.script(fault)
    record = sqs_record(job("receipt:20:u1"))
    clock = FakeClock()
    consumer = pipeline.consumer(clock)

    first = consumer.handle(event(record), FakeContext(FakeClock()))
    assert failed_ids(first) == {record["messageId"]}
    assert pipeline.ledger_item("receipt:20:u1") is None
    assert pipeline.emails_for("receipt:20:u1") == 0

    clock.advance(61_000)  # a pause is asked about again a minute on (test_ses_stops.py)
    second = consumer.handle(event(record), FakeContext(clock))
    assert second == {"batchItemFailures": []}
    assert pipeline.emails_for("receipt:20:u1") == 1


@pytest.mark.parametrize("fault", [Fault.REJECT, Fault.TEMPLATE_MISSING])
def test_permanent_refusal_releases_the_claim_and_moves_the_message_to_the_dlq(pipeline, ses_faults, fault):
    ses_faults.script(fault)
    record = sqs_record(job("receipt:21:u1"))
    response = pipeline.consumer().handle(event(record), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}
    assert pipeline.ledger_item("receipt:21:u1") is None
    [dead] = pipeline.dead_letters()
    attributes = dead["MessageAttributes"]
    assert attributes["sendonce.reasonCode"]["StringValue"] == "ses-refused"
    assert attributes["sendonce.dedupeKey"]["StringValue"] == "receipt:21:u1"
    assert attributes["sendonce.sourceMessageId"]["StringValue"] == record["messageId"]
    assert dead["Body"] == record["body"]
    assert pipeline.emails_for("receipt:21:u1") == 0


def test_unverified_sender_is_refused_by_ses_and_dead_lettered(pipeline):
    body = job("receipt:22:u1", **{"from": "billing@not-verified.example.net"})
    response = pipeline.consumer().handle(event(sqs_record(body)), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}
    [dead] = pipeline.dead_letters()
    assert "MessageRejected" in dead["MessageAttributes"]["sendonce.reason"]["StringValue"]


def _ambiguous_first_send(pipeline, ses_faults, fault: Fault, key: str, policy: DeliveryPolicy):
    """The first delivery's send meets ``fault``, which leaves it unknown whether SES sent: the record fails, the
    claim stays IN_FLIGHT, and its lease expires. Returns the clock and the record, for the redelivery."""
    ses_faults.script(fault)
    clock = FakeClock()
    record = sqs_record(job(key))
    first = pipeline.consumer(clock, delivery=policy).handle(event(record), FakeContext(clock))

    assert failed_ids(first) == {record["messageId"]}
    assert pipeline.status(key) == "IN_FLIGHT"
    clock.advance(LEASE_EXPIRED_MS)
    return clock, record


def test_server_error_is_ambiguous_keeps_the_claim_and_at_most_once_sends_no_more(pipeline, ses_faults):
    clock, record = _ambiguous_first_send(pipeline, ses_faults, Fault.SERVER_ERROR, "receipt:23:u1", NEVER)
    assert pipeline.consumer(clock, delivery=NEVER).handle(event(record), FakeContext(clock)) == {
        "batchItemFailures": []}
    assert pipeline.status("receipt:23:u1") == "UNKNOWN"
    assert ses_faults.send_requests == 1


@pytest.mark.parametrize(("policy", "emails"),
                         [(DeliveryPolicy.NEVER_RESEND, 1), (DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, 2)])
def test_connection_dropped_after_ses_accepted_is_ambiguous_and_the_policy_decides(
    pipeline, ses_faults, policy, emails
):
    clock, record = _ambiguous_first_send(pipeline, ses_faults, Fault.ACCEPT_THEN_DROP, "receipt:24:u1", policy)
    pipeline.consumer(clock, delivery=policy).handle(event(record), FakeContext(clock))
    assert pipeline.emails_for("receipt:24:u1") == emails
    assert pipeline.status("receipt:24:u1") == ("UNKNOWN" if policy is DeliveryPolicy.NEVER_RESEND else "SENT")


def test_ses_unreachable_is_a_definite_refusal_that_releases_the_claim(pipeline):
    unreachable = "http://localhost:9"  # the discard port: nothing listens, the connection is refused
    record = sqs_record(job("receipt:25:u1"))
    response = pipeline.consumer(ses_endpoint=unreachable).handle(event(record), FakeContext(FakeClock()))

    assert failed_ids(response) == {record["messageId"]}
    assert pipeline.ledger_item("receipt:25:u1") is None


def test_same_key_with_a_different_payload_is_not_sent_twice_and_is_flagged(pipeline):
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    consumer.handle(event(sqs_record(job("receipt:26:u1"))), FakeContext(FakeClock()))
    consumer.handle(event(sqs_record(job("receipt:26:u1", text="Different body"))), FakeContext(FakeClock()))

    assert pipeline.emails_for("receipt:26:u1") == 1
    last = json.loads(log.getvalue().splitlines()[-1])
    assert last["outcome"] == "duplicate" and last["keyConflict"] is True


def test_changing_only_the_delivery_field_is_not_a_key_conflict(pipeline):
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    consumer.handle(event(sqs_record(job("receipt:27:u1"))), FakeContext(FakeClock()))
    resend = job("receipt:27:u1", delivery="resend-without-evidence")
    consumer.handle(event(sqs_record(resend)), FakeContext(FakeClock()))
    assert "keyConflict" not in json.loads(log.getvalue().splitlines()[-1])


def test_too_little_time_left_fails_this_and_every_later_record_without_claiming(pipeline):
    records = [sqs_record(job(f"receipt:28:u{i}")) for i in range(3)]
    consumer = pipeline.consumer()
    context = FakeContext(FakeClock(), budget_ms=consumer.settings.budget.record_budget_ms - 1)

    response = consumer.handle(event(*records), context)

    assert failed_ids(response) == {r["messageId"] for r in records}
    assert all(pipeline.ledger_item(f"receipt:28:u{i}") is None for i in range(3))


def test_deadline_reached_mid_batch_stops_there(pipeline):
    clock = FakeClock()
    consumer = pipeline.consumer(clock, parallelism=1)
    context = FakeContext(clock, budget_ms=consumer.settings.budget.record_budget_ms + 500)
    original = consumer.processor.process

    def slow_process(record, deadline):
        result = original(record, deadline)
        clock.advance(1_000)  # each record takes a second of the invocation's time
        return result

    consumer.processor.process = slow_process
    records = [sqs_record(job(f"receipt:29:u{i}")) for i in range(3)]
    response = consumer.handle(event(*records), context)

    assert failed_ids(response) == {records[1]["messageId"], records[2]["messageId"]}
    assert pipeline.emails_per_key() == {"receipt:29:u0": 1}


def test_unreachable_ledger_fails_the_record_without_raising(pipeline):
    record = sqs_record(job("receipt:30:u1"))
    consumer = pipeline.consumer(table_name="no-such-table")
    response = consumer.handle(event(record), FakeContext(FakeClock()))
    assert failed_ids(response) == {record["messageId"]}
    assert pipeline.emails_for("receipt:30:u1") == 0


def test_dlq_unavailable_keeps_the_poison_message_queued(pipeline):
    record = sqs_record("{not json")
    consumer = pipeline.consumer(dead_letter_queue_url=pipeline.dead_letter_queue_url + "-missing")
    response = consumer.handle(event(record), FakeContext(FakeClock()))
    assert failed_ids(response) == {record["messageId"]}


def test_every_record_logs_one_json_line(pipeline):
    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    records = [sqs_record(job("receipt:31:u1")), sqs_record(job("receipt:31:u1")), sqs_record("oops")]
    consumer.handle(event(*records), FakeContext(FakeClock()))

    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    by_message = {line["messageId"]: line for line in lines}
    assert len(lines) == 3 and set(by_message) == {r["messageId"] for r in records}
    first, second, oops = (by_message[r["messageId"]] for r in records)
    assert oops["outcome"] == "invalid_message" and oops["reason"]
    sent, other = (first, second) if first["outcome"] == "sent" else (second, first)
    assert sent["outcome"] == "sent" and sent["sesMessageId"] and sent["attempt"] == 1
    assert sent["dedupeKey"] == "receipt:31:u1"
    # Run one after the other the copy is a duplicate; run at once it meets the live claim and is retried.
    assert other["outcome"] in ("duplicate", "in_flight_elsewhere")


def test_dedupe_key_is_attached_to_the_ses_email_as_a_tag(pipeline):
    captured = []
    consumer = pipeline.consumer()
    ses = consumer.processor._sender._client
    ses.meta.events.register("before-parameter-build.sesv2.SendEmail", lambda params, **_: captured.append(params))
    consumer.handle(event(sqs_record(job("receipt:32:u1", tags={"kind": "receipt"}))), FakeContext(FakeClock()))
    digest = hashlib.sha256(b"receipt:32:u1").hexdigest()[:16]
    assert {"Name": "sendonce-key", "Value": f"receipt_32_u1-{digest}"} in captured[0]["EmailTags"]
    assert {"Name": "kind", "Value": "receipt"} in captured[0]["EmailTags"]


def test_sqs_visible_to_the_consumer_only_through_its_own_dlq_grant(pipeline):
    # The consumer never deletes or receives: the event source does. Its only SQS call is the DLQ send.
    calls = []
    consumer = pipeline.consumer()
    sqs = consumer.processor._dead_letters._client
    sqs.meta.events.register("before-call.sqs.*", lambda model, **_: calls.append(model.name))
    consumer.handle(event(sqs_record("oops"), sqs_record(job("receipt:33:u1"))), FakeContext(FakeClock()))
    assert calls == ["SendMessage"]


def test_ledger_unreachable_after_ses_accepted_acknowledges_and_never_resends(pipeline):
    from botocore.exceptions import ClientError

    log = io.StringIO()
    consumer = pipeline.consumer()
    consumer.log = OutcomeLog(log)
    error = ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "UpdateItem")

    def unreachable(*_args, **_kwargs):
        raise error

    consumer.processor._ledger.mark_sent = unreachable
    record = sqs_record(job("receipt:34:u1"))
    response = consumer.handle(event(record), FakeContext(FakeClock()))

    assert response == {"batchItemFailures": []}  # acknowledged: a redelivery could only send it again
    assert pipeline.emails_for("receipt:34:u1") == 1
    line = json.loads(log.getvalue())
    assert line["outcome"] == "sent_unrecorded" and line["sesMessageId"]


def test_records_handed_back_at_the_deadline_come_back_at_once_not_after_their_visibility_timeout(pipeline, jobs):
    """Records a batch had no time left for are handed back visible again at once, in one request per ten (the
    queue's visibility timeout, 180 s for a 30 s function, would hold them back for nothing)."""
    for n in range(12):
        jobs.enqueue(job(f"receipt:handback:u{n}"))
    records = jobs.receive(batch_size=10, visibility_s=180)
    records += jobs.receive(batch_size=10, visibility_s=180)
    assert len(records) == 12
    consumer = pipeline.consumer(queue_url=jobs.url)
    calls = []
    consumer.redelivery._client.meta.events.register(
        "before-parameter-build.sqs.*", lambda params, model, **_: calls.append(model.name))
    context = FakeContext(FakeClock(), budget_ms=consumer.settings.budget.record_budget_ms - 1)
    response = consumer.handle(event(*records), context)
    assert failed_ids(response) == {r["messageId"] for r in records}
    assert calls == ["ChangeMessageVisibilityBatch"] * 2
    back = jobs.receive(batch_size=10, wait_s=5) + jobs.receive(batch_size=10, wait_s=5)
    assert sorted(r["messageId"] for r in back) == sorted(r["messageId"] for r in records)
