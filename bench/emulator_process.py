"""The AWS emulator in its own process (`sendonce-local serve`), so the consumers' CPU time is theirs alone, and
the resources the consumers share in it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
from plan import ROOT


def start_emulator() -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-m", "sendonce_local", "serve"], cwd=ROOT,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    for line in process.stdout:
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").strip().partition("=")
            os.environ[name] = value
        if line.startswith("#"):
            return process
    raise RuntimeError("the emulator did not start")


@contextmanager
def emulator_in_own_process() -> Iterator[None]:
    """The emulator in its own process, with this process's AWS environment pointed at it for the block and put
    back after (a full run's own emulator keeps serving the other sections)."""
    saved = dict(os.environ)
    process = start_emulator()
    try:
        yield
    finally:
        process.terminate()
        process.wait()
        os.environ.clear()
        os.environ.update(saved)


def create_resources() -> dict[str, str]:
    dynamodb, sqs = boto3.client("dynamodb"), boto3.client("sqs")
    names = {"ours": f"dedupe-{uuid.uuid4().hex[:6]}", "powertools": f"idempotency-{uuid.uuid4().hex[:6]}"}
    for table, key in ((names["ours"], "dedupeKey"), (names["powertools"], "id")):
        dynamodb.create_table(TableName=table, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
    names["dlq"] = sqs.create_queue(QueueName=f"dlq-{uuid.uuid4().hex[:6]}")["QueueUrl"]
    boto3.client("sesv2").create_email_identity(EmailIdentity="example.com")
    return names
