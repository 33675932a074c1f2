"""The boto3 clients, created once per execution environment and shared by the batch's threads."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from .settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sesv2 import SESV2Client
    from mypy_boto3_sqs import SQSClient

_lock = threading.Lock()
_clients: dict[str, Any] = {}


def ses_config(settings: Settings) -> Config:
    # SendEmail has no idempotency token: one try only, or a retried read timeout becomes a second email.
    return Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=settings.budget.ses_connect_timeout_s,
        read_timeout=settings.budget.ses_read_timeout_s,
        max_pool_connections=max(10, settings.parallelism),
    )


def ledger_config(settings: Settings) -> Config:
    # Timeouts sized from the record's ledger budget, and no SDK retry (its backoff alone can sleep for seconds):
    # no ledger or DLQ call outlives the deadline guard. The processor retries while the deadline allows.
    connect_s, read_s = settings.budget.ledger_call_timeouts_s
    return Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=connect_s,
        read_timeout=read_s,
        max_pool_connections=max(10, settings.parallelism),
    )


def _shared(service: str, config: Config, name: str | None = None) -> Any:
    # Clients are thread-safe once made; sessions are not, so each client gets its own, under the lock.
    with _lock:
        name = name or service
        if name not in _clients:
            _clients[name] = boto3.session.Session().client(service, config=config)  # type: ignore[call-overload]
        return _clients[name]


def recorder_client(service: str) -> Any:
    """The event recorder's and the quota watch's clients: idempotent writes and reads, so the SDK's standard
    retries are safe."""
    return _shared(service, Config(retries={"total_max_attempts": 3, "mode": "standard"}), f"recorder:{service}")


def relay_client() -> Any:
    """The outbox relay's SQS client, on the SDK's default retries: a job relayed twice is one the consumer's
    ledger absorbs."""
    return _shared("sqs", Config(), "relay:sqs")


def ses(settings: Settings) -> SESV2Client:
    return _shared("sesv2", ses_config(settings))  # type: ignore[no-any-return]


def dynamodb(settings: Settings) -> DynamoDBClient:
    return _shared("dynamodb", ledger_config(settings))  # type: ignore[no-any-return]


def events(settings: Settings) -> Any:
    return _shared("events", ledger_config(settings))


def sqs(settings: Settings) -> SQSClient:
    return _shared("sqs", ledger_config(settings))  # type: ignore[no-any-return]


def s3(settings: Settings) -> Any:
    """Reads of s3 attachments: the ledger's call timeouts (a read timeout bounds each wait for bytes), no SDK
    retry: a slow or throttled S3 is waited out by the redelivery, within the record's time budget."""
    return _shared("s3", ledger_config(settings))


def secrets(settings: Settings) -> Any:
    """key_privacy's secret, read once per execution environment: the ledger's timeouts, no SDK retry."""
    return _shared("secretsmanager", ledger_config(settings))
