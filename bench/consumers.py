"""The three consumers measured side by side, each a factory of a Lambda-style handler with its own clients.

(a) sendonce's bundled consumer; (b) the usual recipe built with Powertools for AWS Lambda's idempotency and
batch utilities, sending with SES the same way; (c) a baseline that sends with no dedupe at all.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

Handler = Callable[[dict[str, Any], Any], Any]


def ses_request(job: dict[str, Any]) -> dict[str, Any]:
    """The same SendEmail every consumer makes for a simple job."""
    return {
        "FromEmailAddress": job["from"],
        "Destination": {"ToAddresses": job["to"] if isinstance(job["to"], list) else [job["to"]]},
        "Content": {"Simple": {"Subject": {"Data": job["subject"]}, "Body": {"Text": {"Data": job["text"]}}}},
    }


def sendonce_handler(table: str, dlq_url: str, parallelism: int = 1, evidence: tuple[str, str] | None = None,
                     attachments_bucket: str | None = None, read_timeout_s: float | None = None,
                     **settings: Any) -> tuple[Handler, dict[str, Any]]:
    """``evidence``: (configuration set, pipeline tag) to send with SES events on; ``attachments_bucket``: the
    bucket its jobs' claim checks are read from (an S3 client is made for it, as the deployed consumer makes one);
    ``read_timeout_s``: how long its DynamoDB, SQS and S3 clients wait for an answer, where a section counts calls
    and a loaded emulator's late answer would make it count a retry (the deployed consumer's budget otherwise);
    ``settings``: any other of the consumer's settings (the mis-keyed-producer guard's)."""
    from sendonce_runtime import aws_clients
    from sendonce_runtime.handler import Consumer
    from sendonce_runtime.outcome_log import OutcomeLog
    from sendonce_runtime.settings import Settings

    options: dict[str, Any] = {"attachments_bucket": attachments_bucket, **settings}
    if evidence is not None:
        options.update(configuration_set=evidence[0], pipeline_tag=evidence[1], evidence_grace_ms=300_000)
    settings = Settings(table_name=table, dead_letter_queue_url=dlq_url, parallelism=parallelism,
                        pipeline_name="bench", **options)
    ledger = aws_clients.ledger_config(settings)
    if read_timeout_s is not None:
        ledger = ledger.merge(Config(read_timeout=read_timeout_s))
    clients = {
        "dynamodb": boto3.client("dynamodb", config=ledger),
        "sesv2": boto3.client("sesv2", config=aws_clients.ses_config(settings)),
        "sqs": boto3.client("sqs", config=ledger),
    }
    if attachments_bucket is not None:
        clients["s3"] = boto3.client("s3", config=ledger)
    consumer = Consumer.from_clients(settings, clients["dynamodb"], clients["sesv2"], clients["sqs"],
                                     log=OutcomeLog(io.StringIO(), pipeline="bench"), s3=clients.get("s3"))
    return consumer.handle, clients


def powertools_handler(table: str) -> tuple[Handler, dict[str, Any]]:
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    clients = {"dynamodb": boto3.client("dynamodb"), "sesv2": boto3.client("sesv2")}
    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=clients["dynamodb"])
    config = IdempotencyConfig(event_key_jmespath="dedupeKey", expires_after_seconds=7 * 86_400)
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(data_keyword_argument="job", persistence_store=persistence, config=config)
    def send(job: dict[str, Any]) -> dict[str, Any]:
        return {"MessageId": clients["sesv2"].send_email(**ses_request(job))["MessageId"]}

    def record_handler(record: Any) -> None:
        send(job=json.loads(record.body))

    def handler(event: dict[str, Any], context: Any) -> Any:
        config.register_lambda_context(context)
        return process_partial_response(event=event, record_handler=record_handler, processor=processor,
                                        context=context)

    return handler, clients


def baseline_handler() -> tuple[Handler, dict[str, Any]]:
    clients = {"sesv2": boto3.client("sesv2")}

    def handler(event: dict[str, Any], context: Any) -> Any:
        for record in event["Records"]:
            clients["sesv2"].send_email(**ses_request(json.loads(record["body"])))
        return {"batchItemFailures": []}

    return handler, clients


def factory(kind: str, names: dict[str, str], parallelism: int = 1) -> Callable[[], Any]:
    return {
        "sendonce": lambda: sendonce_handler(names["ours"], names["dlq"], parallelism),
        "powertools": lambda: powertools_handler(names["powertools"]),
        "baseline": baseline_handler,
    }[kind]
