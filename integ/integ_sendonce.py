"""sendonce on real AWS: one pipeline (with SES's events and the outbox) in your account, driven and checked through
AWS API calls by aws-cdk.integ-tests-alpha. Run it with `make integ SENDER=...` (see the README's "On real AWS").

Every recipient is SES's mailbox simulator, which works in the SES sandbox and costs as any email: success,
bounce and complaint. The test proves, in your account and region:
- a job enqueued twice at once, and again once it was sent, is sent once: the ledger holds one SES message id
  for its key, and SES's own events (which would report a second email) name only that one;
- SES's Send and Delivery events are recorded on the key; a bounce and a complaint are recorded on theirs;
- a job written to the outbox is relayed and sent;
- the dead-letter queue holds exactly the poison jobs, each with its reason;
- no alarm of the pipeline is in ALARM at the end.
It cannot prove what needs a worker killed at a chosen instant (the crash window): that is the emulator's job.

The sender is a verified SES identity of your account (a domain or an address), read from SENDONCE_INTEG_SENDER;
without it the app uses example.com, which is what the committed snapshot holds and `make test` compares.
"""

from __future__ import annotations

import json
import os

import aws_cdk as cdk
from aws_cdk import integ_tests_alpha as integ
from integ_env import INTEG_RUN, INTEG_SENDER

from sendonce_constructs import SendOnceEmailQueue
from sendonce_contract.schema import Ledger, OutboxItem

SENDER = os.environ.get(INTEG_SENDER, "example.com")
FROM = SENDER if "@" in SENDER else f"sendonce-integ@{SENDER}"
SIMULATOR = "simulator.amazonses.com"
RUN = os.environ.get(INTEG_RUN, "snapshot")  # keys differ between runs, so a rerun proves anew
WAIT = {"total_timeout": cdk.Duration.minutes(10), "interval": cdk.Duration.seconds(20)}
EPOCH_MS = integ.Match.string_like_regexp(r"^[0-9]{13}$")


def job(name: str, recipient: str) -> str:
    return json.dumps({"dedupeKey": f"integ:{RUN}:{name}", "from": FROM, "to": [f"{recipient}@{SIMULATOR}"],
                       "subject": f"sendonce integration test: {name}", "text": "Sent by sendonce's integration test."})


app = cdk.App()
stack = cdk.Stack(app, "SendOnceInteg")
pipeline = SendOnceEmailQueue(
    stack, "Pipeline", sender=SENDER, outbox=True, evidence_grace_period=cdk.Duration.seconds(60),
    removal_policy=cdk.RemovalPolicy.DESTROY, queue_removal_policy=cdk.RemovalPolicy.DESTROY,
)
test = integ.IntegTest(app, "SendOnce", test_cases=[stack], diff_assets=False)
assertions = test.assertions
queue_url, dlq_url = pipeline.queue.queue_url, pipeline.dead_letter_queue.queue_url


def enqueue(body: str) -> integ.IApiCall:
    return assertions.aws_api_call("SQS", "sendMessage", {"QueueUrl": queue_url, "MessageBody": body})


def ledger(name: str) -> integ.IApiCall:
    return assertions.aws_api_call("DynamoDB", "getItem", {
        "TableName": pipeline.table.table_name, "Key": {"dedupeKey": {"S": f"integ:{RUN}:{name}"}}})


def queue_depth(url: str) -> integ.IApiCall:
    return assertions.aws_api_call("SQS", "getQueueAttributes", {
        "QueueUrl": url, "AttributeNames": ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                                            "ApproximateNumberOfMessagesDelayed"]})


# Enqueue: one job twice at once, a bounce, a complaint, two poison jobs, and one job through the outbox.
sends = [enqueue(job("once", "success")), enqueue(job("once", "success")), enqueue(job("bounce", "bounce")),
         enqueue(job("complaint", "complaint")), enqueue("not json"),
         enqueue(json.dumps({"dedupeKey": f"integ:{RUN}:poison", "form": FROM}))]
outbox_key = f"integ:{RUN}:outbox"
sends.append(assertions.aws_api_call("DynamoDB", "putItem", {
    "TableName": pipeline.outbox.table.table_name if pipeline.outbox else "",
    "Item": {"dedupeKey": {"S": outbox_key}, "job": {"S": job("outbox", "success")},
             OutboxItem.CREATED_AT: {"N": "1700000000000"}, OutboxItem.EXPIRES_AT: {"N": "4102444800"}}}))
first = sends[0]
for call in sends[1:]:
    first = first.next(call)

# The job is sent once, and SES's Send and Delivery events are recorded on its key.
sent = ledger("once")
sent.expect(integ.ExpectedResult.object_like({"Item": {
    "status": {"S": "SENT"}, Ledger.SES_ACCEPTED_AT: {"N": EPOCH_MS}, Ledger.DELIVERED_AT: {"N": EPOCH_MS}}}))
sent.wait_for_assertions(**WAIT)
first.next(sent)

# Re-enqueued once sent: a duplicate. The queue drains; by the end (after the bounce, complaint and outbox checks,
# time enough for SES's events of a second email), SES has reported one email for the key, the ledger's own.
reenqueued = enqueue(job("once", "success"))
drained = queue_depth(queue_url)
drained.expect(integ.ExpectedResult.object_like({"Attributes": {
    "ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
    "ApproximateNumberOfMessagesDelayed": "0"}}))
drained.wait_for_assertions(**WAIT)
once = ledger("once")
once.expect(integ.ExpectedResult.object_like({"Item": {
    Ledger.SES_MESSAGE_IDS: {"SS": [sent.get_att_string(f"Item.{Ledger.SES_MESSAGE_ID}.S")]}}}))
once.wait_for_assertions(**WAIT)

bounced = ledger("bounce")
bounced.expect(integ.ExpectedResult.object_like({"Item": {
    "status": {"S": "SENT"}, Ledger.BOUNCED_AT: {"N": EPOCH_MS}, "bounceType": {"S": "Permanent"}}}))
bounced.wait_for_assertions(**WAIT)
complained = ledger("complaint")
complained.expect(integ.ExpectedResult.object_like({"Item": {
    "status": {"S": "SENT"}, Ledger.COMPLAINED_AT: {"N": EPOCH_MS}}}))
complained.wait_for_assertions(**WAIT)
relayed = ledger("outbox")
relayed.expect(integ.ExpectedResult.object_like({"Item": {"status": {"S": "SENT"},
                                                          Ledger.DELIVERED_AT: {"N": EPOCH_MS}}}))
relayed.wait_for_assertions(**WAIT)

# The DLQ holds exactly the two poison jobs.
poisoned = queue_depth(dlq_url)
poisoned.expect(integ.ExpectedResult.object_like({"Attributes": {
    "ApproximateNumberOfMessages": "2", "ApproximateNumberOfMessagesNotVisible": "0"}}))
poisoned.wait_for_assertions(**WAIT)

# At the end no alarm of the pipeline is in ALARM.
calm = assertions.aws_api_call("CloudWatch", "describeAlarms", {
    "AlarmNames": [alarm.alarm_name for alarm in pipeline.alarms.values()], "StateValue": "ALARM"})
calm.expect(integ.ExpectedResult.object_like({"MetricAlarms": []}))

chain = sent
for call in (reenqueued, drained, bounced, complained, relayed, poisoned, once, calm):
    chain = chain.next(call)

app.synth()
