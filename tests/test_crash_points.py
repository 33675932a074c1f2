"""A worker killed at each point of the protocol, then the message redelivered: the emails SES accepted.

The only cells that lose or double an email are the window no protocol closes (the worker died after its
claim, so its send may or may not have reached SES); there the delivery policy picks the failure, and the
ledger says UNKNOWN wherever an email may be lost.
"""

from __future__ import annotations

import pytest
from consumer_harness import FakeClock, FakeContext, event, job, sqs_record
from crash_injection import CrashPoint, WorkerKilled, crash_at

from sendonce_contract.delivery import DeliveryPolicy

VISIBILITY_TIMEOUT_MS = 6 * 30_000  # the construct's default: the redelivery comes no sooner

EXPECTED = {
    (DeliveryPolicy.NEVER_RESEND, CrashPoint.BEFORE_CLAIM): (1, "SENT"),
    (DeliveryPolicy.NEVER_RESEND, CrashPoint.AFTER_CLAIM): (0, "UNKNOWN"),
    (DeliveryPolicy.NEVER_RESEND, CrashPoint.AFTER_SES_ACCEPTED): (1, "UNKNOWN"),
    (DeliveryPolicy.NEVER_RESEND, CrashPoint.AFTER_SENT): (1, "SENT"),
    (DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, CrashPoint.BEFORE_CLAIM): (1, "SENT"),
    (DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, CrashPoint.AFTER_CLAIM): (1, "SENT"),
    (DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, CrashPoint.AFTER_SES_ACCEPTED): (2, "SENT"),
    (DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, CrashPoint.AFTER_SENT): (1, "SENT"),
}

# Every guarantee here holds whether a batch's records run in turn or ten at once.
pytestmark = pytest.mark.usefixtures("at_both_parallelisms")


@pytest.mark.parametrize(("policy", "point"), list(EXPECTED), ids=lambda v: v.value)
def test_worker_killed_then_message_redelivered(pipeline, policy, point):
    clock = FakeClock()
    record = sqs_record(job("reset:77:u9"))

    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, delivery=policy), point).handle(event(record), FakeContext(clock))
    clock.advance(VISIBILITY_TIMEOUT_MS)
    response = pipeline.consumer(clock, delivery=policy).handle(event(record), FakeContext(clock))

    emails, status = EXPECTED[(policy, point)]
    assert response == {"batchItemFailures": []}
    assert pipeline.emails_for("reset:77:u9") == emails
    assert pipeline.status("reset:77:u9") == status


@pytest.mark.parametrize("policy", list(DeliveryPolicy), ids=lambda v: v.value)
def test_redelivery_while_the_dead_workers_lease_is_live_waits(pipeline, policy):
    # A message can come back before its lease expires only if visibility was shortened; it must not send.
    clock = FakeClock()
    record = sqs_record(job("reset:78:u9"))
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, delivery=policy), CrashPoint.AFTER_CLAIM).handle(
            event(record), FakeContext(clock)
        )
    response = pipeline.consumer(clock, delivery=policy).handle(event(record), FakeContext(clock))
    assert response == {"batchItemFailures": [{"itemIdentifier": record["messageId"]}]}
    assert pipeline.emails_for("reset:78:u9") == 0


@pytest.mark.parametrize("policy", list(DeliveryPolicy), ids=lambda v: v.value)
@pytest.mark.parametrize("point", [CrashPoint.AFTER_CLAIM, CrashPoint.AFTER_SES_ACCEPTED], ids=lambda v: v.value)
def test_worker_killed_mid_batch_while_sends_run_at_once(pipeline, policy, point):
    clock = FakeClock()
    records = [sqs_record(job(f"batch:{n}")) for n in range(10)]
    with pytest.raises(WorkerKilled):
        crash_at(pipeline.consumer(clock, delivery=policy, parallelism=10), point).handle(
            event(*records), FakeContext(clock)
        )
    clock.advance(VISIBILITY_TIMEOUT_MS)  # the whole batch comes back: the invocation returned nothing
    response = pipeline.consumer(clock, delivery=policy, parallelism=10).handle(event(*records), FakeContext(clock))

    assert response == {"batchItemFailures": []}
    for n in range(10):
        key, emails = f"batch:{n}", pipeline.emails_for(f"batch:{n}")
        if policy is DeliveryPolicy.NEVER_RESEND:
            assert emails <= 1
            assert emails == 1 or pipeline.status(key) == "UNKNOWN"
        else:
            assert 1 <= emails <= 2
