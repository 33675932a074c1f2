"""The bound on a waiting job's messages, under late answers and kills between the copy and the acknowledgement,
repeated in any order, for copies of a throttled job and copies carrying an unrecorded completion (a property
test against the emulator's SQS).

The bound (README, "Slow answers"): a waiting job has at most two messages for each message the producer
enqueued: the delayed copy that carries it on and, until that copy arrives and deletes it, the message it
replaced. A copy whose SendMessage answer was lost keeps its original out of sight instead of making another; an
original whose acknowledgement was lost is deleted by its copy.
"""

from __future__ import annotations

import contextlib
import itertools

import pytest
from botocore.exceptions import ClientError
from consumer_harness import SENDER_DOMAIN, FakeClock, FakeContext, event, job
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_budget import examples
from ses_fault_proxy import Fault
from slow_aws import Jobs, consumer

from sendonce_local.emulator.slow_services import LATE, Rule
from sendonce_runtime.ses_stops import PROBE_EVERY_MS

# What can go wrong around one delivery of a waiting job (SES throttles it, so it waits again).
COPY_ANSWER_LOST = "copy answer lost"  # SendMessage carried out, its answer lost
ACK_LOST = "killed before the acknowledgement"  # the invocation dies after the copy: Lambda deletes nothing
HOLD_ANSWER_LOST = "visibility answer lost"  # ChangeMessageVisibility carried out, its answer lost
DELETE_ANSWER_LOST = "copy's delete answer lost"  # the copy's delete of its original (a batch's), its answer lost
# SES accepts, the SENT record's write is carried out but its answer lost: a copy carries the completion, and its
# original is held as any copied original is (a kill before the acknowledgement must not bring it back first).
COMPLETION_ANSWER_LOST = "completion's answer lost"
FAULTS = (COPY_ANSWER_LOST, ACK_LOST, HOLD_ANSWER_LOST, DELETE_ANSWER_LOST, COMPLETION_ANSWER_LOST)
_examples = itertools.count()


@pytest.fixture
def world(pipeline, ses_faults, slow):
    return pipeline, ses_faults, slow


# Every run meets each fault at least once, whatever the drawn examples reach: a throttled job whose copy's answer is
# lost and whose invocation dies before its acknowledgement, then whose hold's answer is lost, then whose copy's
# delete of its original is lost; and a parked job whose completion's answer is lost as its invocation dies.
@example(rounds=[[{COPY_ANSWER_LOST, ACK_LOST}], [{HOLD_ANSWER_LOST}], [{DELETE_ANSWER_LOST}]], budget_ms=3_000,
         refusal=Fault.THROTTLE)
@example(rounds=[[{COMPLETION_ANSWER_LOST, ACK_LOST}], [{COPY_ANSWER_LOST}]], budget_ms=30_000,
         refusal=Fault.SENDING_PAUSED)
@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=st.lists(st.lists(st.sets(st.sampled_from(FAULTS)), min_size=1, max_size=2), min_size=1,
                       max_size=5),
       budget_ms=st.sampled_from([3_000, 30_000]),
       # Why it waits: SES throttles it (a copy of its own), or SES stopped the account's sending (the lane parks
       # it, its copy made with its batch's, SES asked again a minute on).
       refusal=st.sampled_from([Fault.THROTTLE, Fault.SENDING_PAUSED]))
def test_a_waiting_job_never_has_more_than_two_messages_and_is_sent_once(world, rounds, budget_ms, refusal):
    pipeline, ses_faults, slow = world
    n = next(_examples)
    jobs = Jobs(f"bound-{n}")
    key = f"receipt:bound{n}:u1"
    clock = FakeClock()
    built, _ = consumer(pipeline, slow, jobs, clock, sender_identity=SENDER_DOMAIN)
    built.redelivery.postponement_s = lambda outcome, postponements: 0  # copies visible at once: no waiting
    jobs.enqueue(job(key))
    unacknowledged = []
    for faults_by_message in rounds:
        records = jobs.receive(wait_s=3)
        for record, faults in zip(records, itertools.cycle(faults_by_message)):
            # A parked job's calls are its batch's (the batch forms of each).
            rules = [Rule("sqs", op, LATE) for op in ("SendMessage", "SendMessageBatch")] * (COPY_ANSWER_LOST in faults)
            rules += [Rule("sqs", op, LATE) for op in ("ChangeMessageVisibility", "ChangeMessageVisibilityBatch")
                      ] * (HOLD_ANSWER_LOST in faults)
            rules += [Rule("sqs", "DeleteMessageBatch", LATE)] * (DELETE_ANSWER_LOST in faults)
            rules += [Rule("dynamodb", "UpdateItem", LATE)] * (COMPLETION_ANSWER_LOST in faults)
            slow.fault(*rules)
            if COMPLETION_ANSWER_LOST not in faults and pipeline.emails_for(key) == 0 and not ses_faults.pending():
                ses_faults.script(refusal)  # it waits again (once sent, or parked, SES is not asked)
            response = built.handle(event(record), FakeContext(FakeClock(), budget_ms=budget_ms))
            slow.clear()
            if ACK_LOST not in faults:
                jobs.acknowledge(response, record)
            else:
                unacknowledged.append(record)
            assert jobs.depth() <= 2, (faults_by_message, jobs.depth())
    # The faults end, and the visibility timeouts of the messages left unacknowledged with them (one that was done
    # and has no copy to delete it comes back to be acknowledged as a duplicate): the job is sent once and nothing
    # is left behind.
    ses_faults.clear()  # SES sends again, and a minute on the lane asks it whether it does
    clock.advance(PROBE_EVERY_MS + 1_000)
    for record in unacknowledged:
        with contextlib.suppress(ClientError):  # deleted by its copy since
            jobs.sqs.change_message_visibility(QueueUrl=jobs.url, ReceiptHandle=record["receiptHandle"],
                                               VisibilityTimeout=0)
    for _ in range(6):
        records = jobs.receive(wait_s=3)
        if not records:
            break
        for record in records:
            jobs.acknowledge(built.handle(event(record), FakeContext(FakeClock(), budget_ms=budget_ms)), record)
    assert pipeline.emails_for(key) == 1
    assert jobs.depth() == 0 and pipeline.dead_letters() == []
