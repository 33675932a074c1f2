"""A paced record whose send slot is far off reads its key's record first: a key already sent or cancelled is
settled at once, taking no slot and leaving no copy; one due soon, or a read the ledger does not answer, waits for
its slot as before and its claim decides.

The consumer runs against the emulator over HTTP, its DynamoDB and SQS behind the slow proxy (``slow_aws``); the
jobs are real SQS messages; emails are counted in the emulator's SES.
"""

from __future__ import annotations

import io
import json
import time

from consumer_harness import FakeClock, FakeContext, event, failed_ids, job
from slow_aws import consumer

from sendonce_local.emulator.slow_services import Rule
from sendonce_producer import cancel
from sendonce_runtime.send_rate import SETTLED_READ_AFTER_S, PaceSends, SendRateLimiter

SLOW_RATE = 0.001  # one send, then the next a thousand seconds later


def paced(pipeline, slow, jobs):
    """A consumer paced at one email per thousand seconds whose first slot is at once, and its ledger reads."""
    built, log = consumer(pipeline, slow, jobs, FakeClock(), parallelism=1, max_send_rate=SLOW_RATE)
    [pace] = [check for check in built.processor.checks if isinstance(check, PaceSends)]
    pace.limiter = SendRateLimiter(rate=SLOW_RATE, phase=lambda: 0.0)
    reads: list[str] = []
    built.processor._ledger._client.meta.events.register(
        "before-send.dynamodb.GetItem", lambda request, **_: reads.append(json.loads(request.body)["Key"]))
    return built, log, pace.limiter, reads


def outcomes(log: io.StringIO) -> list[str]:
    return [json.loads(line)["outcome"] for line in log.getvalue().splitlines()]


def deliver(built, jobs, *bodies):
    for body in bodies:
        jobs.enqueue(body)
    records: list[dict] = []
    while len(records) < len(bodies):
        records += jobs.receive()
    response = built.handle(event(*records), FakeContext(FakeClock(), budget_ms=60_000))
    jobs.acknowledge(response, *records)
    return records, response


def test_a_duplicate_far_from_its_slot_is_settled_at_once_with_no_slot_taken_and_no_copy(pipeline, slow, jobs):
    built, log, limiter, reads = paced(pipeline, slow, jobs)
    deliver(built, jobs, job("settled:sent"))
    assert pipeline.emails_for("settled:sent") == 1 and reads == []  # its slot was at once: nothing read
    slot_at = time.monotonic() + limiter.next_slot_in()
    assert slot_at - time.monotonic() > SETTLED_READ_AFTER_S

    _, response = deliver(built, jobs, job("settled:sent"), job("settled:fresh"))

    # The duplicate is acknowledged as one; the fresh job, with no slot in this invocation, goes back for later.
    assert outcomes(log)[1:] == ["duplicate", "paced"]
    assert failed_ids(response) == set() and jobs.depth() == 1  # one copy: the fresh job's, none of the duplicate
    assert pipeline.emails_for("settled:sent") == 1 and pipeline.ledger_item("settled:fresh") is None
    assert len(reads) == 2  # both read their keys before a wait past their invocation
    # The duplicate took no slot: the fresh job's turn is the one the bucket had.
    assert abs(time.monotonic() + limiter.next_slot_in() - slot_at) < 0.1


def test_a_cancelled_key_far_from_its_slot_is_settled_cancelled_at_once(pipeline, slow, jobs):
    built, log, _, _ = paced(pipeline, slow, jobs)
    deliver(built, jobs, job("settled:first"))
    assert cancel(pipeline.table_name, "settled:cancelled").cancelled

    _, response = deliver(built, jobs, job("settled:cancelled"))

    assert outcomes(log)[-1] == "cancelled" and failed_ids(response) == set() and jobs.depth() == 0
    assert pipeline.emails_per_key().get("settled:cancelled", 0) == 0


def test_without_the_ledger_s_answer_a_duplicate_waits_for_its_slot_as_before_and_is_never_sent_twice(
        pipeline, slow, jobs):
    built, log, _, reads = paced(pipeline, slow, jobs)
    deliver(built, jobs, job("settled:throttled"))
    slow.fault(Rule("dynamodb", "GetItem", "ProvisionedThroughputExceededException"))

    deliver(built, jobs, job("settled:throttled"))

    assert reads and outcomes(log)[-1] == "paced" and jobs.depth() == 1  # a delayed copy, due at its turn
    slow.clear()
    # Its copy, due at its turn, meets the claim: a bucket with a slot at once claims it unread, a duplicate.
    [pace] = [check for check in built.processor.checks if isinstance(check, PaceSends)]
    pace.limiter = SendRateLimiter(rate=SLOW_RATE, phase=lambda: 0.0)
    before = len(reads)
    deliver(built, jobs, job("settled:throttled"))
    assert outcomes(log)[-1] == "duplicate" and len(reads) == before
    assert pipeline.emails_for("settled:throttled") == 1 and pipeline.dead_letters() == []
