"""The emulator's EventBridge behaves as AWS's where the pipeline relies on it."""

from __future__ import annotations

import json

import boto3


def test_a_scheduled_rule_matches_no_event_put_on_the_bus(aws):
    # The quota watch's schedule rule targets a Lambda function; moto matched it to every event and failed the
    # whole PutEvents, so SES's events never reached the recorder in the demo.
    events, sqs = boto3.client("events"), boto3.client("sqs")
    queue = sqs.create_queue(QueueName="evidence")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name="quota-watch", ScheduleExpression="rate(5 minutes)")
    events.put_targets(Rule="quota-watch",
                       Targets=[{"Id": "watch", "Arn": "arn:aws:lambda:us-east-1:123456789012:function:watch"}])
    events.put_rule(Name="evidence", EventPattern=json.dumps({"source": ["aws.ses"]}))
    events.put_targets(Rule="evidence", Targets=[{"Id": "queue", "Arn": queue_arn}])
    answer = events.put_events(Entries=[{"Source": "aws.ses", "DetailType": "Email Sent", "Detail": "{}"}])
    assert answer["FailedEntryCount"] == 0
    assert len(sqs.receive_message(QueueUrl=queue).get("Messages", [])) == 1
