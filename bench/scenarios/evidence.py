"""8. SES events as evidence: what confirming each send costs, every AWS call counted."""

from __future__ import annotations

import io
import uuid
from collections import Counter
from typing import Any

import boto3
import consumers
from prices import item_bytes

from sendonce_testing.lambda_events import LambdaContext as Context
from sendonce_testing.lambda_events import job
from sendonce_testing.lambda_events import lambda_sqs_record as record

EVIDENCE_SET = "bench-evidence"


def evidence_costs(names: dict[str, str], emails: int) -> dict[str, Any]:
    """First sends with SES events on: SES's events played as SES publishes them (Send and Delivery for each
    email) and handed to the recorder in batches of ten, as its SQS event source does; every AWS call counted."""
    from sendonce_local.emulator.ses_publisher import (
        EventFaults,
        SendLog,
        SesEventPublisher,
        accepted_send,
        as_sqs_records,
    )
    from sendonce_runtime.event_recorder import EventLog, EventRecorder, RecorderSettings

    handler, clients = consumers.sendonce_handler(names["ours"], names["dlq"], evidence=(EVIDENCE_SET, "bench"))
    sends = SendLog()
    send_email = clients["sesv2"].send_email

    def send_and_log(**params: Any) -> Any:
        answer = send_email(**params)
        sends.add(accepted_send(params, answer["MessageId"]))
        return answer

    clients["sesv2"].send_email = send_and_log
    recorder_clients = {"dynamodb": boto3.client("dynamodb"), "sqs": boto3.client("sqs")}
    recorder = EventRecorder.from_clients(RecorderSettings(names["ours"], names["dlq"], "bench"),
                                          recorder_clients["dynamodb"], recorder_clients["sqs"],
                                          log=EventLog(io.StringIO()))
    consumer_calls: Counter[str] = Counter()
    recorder_calls: Counter[str] = Counter()
    for client in clients.values():
        client.meta.events.register("before-call.*.*", lambda model, **_: consumer_calls.update([model.name]))
    for client in recorder_clients.values():
        client.meta.events.register("before-call.*.*", lambda model, **_: recorder_calls.update([model.name]))
    invocations = [0]

    def deliver(events: Any) -> None:
        invocations[0] += 1
        recorder.handle({"Records": as_sqs_records(events)})

    publisher = SesEventPublisher([EVIDENCE_SET], deliver, "123456789012", "us-east-1",
                                  EventFaults(delay_s=0, outcome_delay_s=0), log=sends)
    prefix = uuid.uuid4().hex[:8]
    for start in range(0, emails, 10):
        handler({"Records": [record(job(f"{prefix}:{n}")) for n in range(start, min(emails, start + 10))]}, Context())
    events = publisher.pump(float("inf"))
    item = dict(boto3.client("dynamodb").get_item(TableName=names["ours"],
                                                  Key={"dedupeKey": {"S": f"{prefix}:0"}})["Item"])
    return {"emails": emails, "events": events, "invocations": invocations[0], "consumer": dict(consumer_calls),
            "recorder": dict(recorder_calls), "item_bytes": item_bytes(item)}
