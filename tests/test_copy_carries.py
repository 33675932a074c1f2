"""What a delayed copy carries on from the message it replaces, whatever its wait: every unsent-claim token not yet
taken over, a completion not yet written, and the hold of a message the consumer took itself (issue 55's smaller
edges). Through the emulator over HTTP: the job queue is SQS's, each copy read back from it."""

from __future__ import annotations

import json

from consumer_harness import FakeClock, FakeContext, event, job
from slow_aws import Jobs, consumer

from sendonce_contract.message import CONTRACT_VERSION
from sendonce_contract.schema import CopyAttribute
from sendonce_local.emulator.slow_services import Rule


def delivered_with(jobs: Jobs, body: dict, attributes: dict[str, str]) -> dict:
    """The job as Lambda hands it over, its message carrying our attributes as an earlier copy would."""
    jobs.sqs.send_message(QueueUrl=jobs.url, MessageBody=json.dumps(body), MessageAttributes={
        name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()})
    [record] = jobs.receive()
    return record


def attribute(record: dict, name: str) -> str | None:
    value = record["messageAttributes"].get(name)
    return value["stringValue"] if value else None


def test_every_unsent_claim_token_not_yet_taken_over_is_carried_on(pipeline, slow):
    """Three deliveries in a row whose ledger calls went unanswered: each may have written a claim nobody sent under,
    and the record's owner may be any of them, so the copy carries them all, not the last one or two."""
    jobs = Jobs("tokens")
    built, _ = consumer(pipeline, slow, jobs)
    built.redelivery.postponement_s = lambda outcome, postponements: 0
    record = delivered_with(jobs, job("receipt:tokens:u1"), {CopyAttribute.UNSENT_CLAIM: "a" * 32 + " " + "b" * 32})
    slow.fault(Rule("dynamodb", None, "ProvisionedThroughputExceededException"))
    jobs.acknowledge(built.handle(event(record), FakeContext(FakeClock())), record)
    slow.clear()
    [copy] = jobs.receive()
    tokens = attribute(copy, CopyAttribute.UNSENT_CLAIM).split()
    assert tokens[:2] == ["a" * 32, "b" * 32] and len(tokens) == 3


def test_a_completion_is_carried_on_by_a_copy_made_before_its_turn_to_be_written(pipeline, slow):
    """A copy carrying SES's accepted send, met by a consumer older than its job's contract: the job waits for the
    deploy as a copy, and that copy still carries the completion, or another copy would take the key for a dead
    worker's and send it again."""
    jobs = Jobs("carried")
    built, _ = consumer(pipeline, slow, jobs)
    built.redelivery.postponement_s = lambda outcome, postponements: 0
    newer = job("receipt:carried:u1", contractVersion=CONTRACT_VERSION + 1)
    record = delivered_with(jobs, newer, {CopyAttribute.UNRECORDED_SEND: "owner-1 ses-id-1"})
    jobs.acknowledge(built.handle(event(record), FakeContext(FakeClock())), record)
    [copy] = jobs.receive()
    assert attribute(copy, CopyAttribute.UNRECORDED_SEND) == "owner-1 ses-id-1"
