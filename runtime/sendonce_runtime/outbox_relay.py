"""The outbox relay: moves jobs written to the outbox table from its DynamoDB stream to the job queue.

Handler ``sendonce_runtime.outbox_relay.handler``. A stream delivers each record at least once; a job relayed
twice is absorbed by the consumer's dedupe ledger. A failed send is reported by its sequence number, so the event
source retries from there and nothing after it is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sendonce_contract.companion_configs import RelayConfig
from sendonce_contract.fifo import fifo_message_ids
from sendonce_contract.priority import priority_of, queue_for
from sendonce_contract.schema import OutboxItem
from sendonce_contract.tenant import body_tenant, tenant_group_id

from .shell import Once

BATCH = 10
Digest = Callable[[str], str]


def _entry(index: int, change: dict[str, Any], fifo: bool, digest: Digest | None) -> dict[str, Any]:
    """The SendMessage entry for one stream record's new outbox item (``change``, its ``dynamodb``)."""
    image = change["NewImage"]
    key = image[OutboxItem.KEY]["S"]
    body = image[OutboxItem.JOB]["S"]
    entry: dict[str, Any] = {"Id": str(index), "MessageBody": body}
    if fifo:
        # The item's stream position names its sending: a relay's retry of it is SQS's to drop, a new item is not.
        entry.update(fifo_message_ids(body, key, f"outbox item {change.get('SequenceNumber', '')}",
                                      image.get(OutboxItem.GROUP_ID, {}).get("S")))
    tenant_group = tenant_group_id(body_tenant(body), digest, fifo)
    if tenant_group is not None:  # SQS fair queues: the tenant's group id, as the producer's enqueue gives it
        entry["MessageGroupId"] = tenant_group
    return entry


def relay(records: list[dict[str, Any]], sqs: Any, queue_url: str, fifo: bool,
          urgent_queue_url: str | None = None, digest: Digest | None = None) -> list[str]:
    """Send the INSERTed jobs, each to its lane's queue (urgent jobs to ``urgent_queue_url`` when there is one);
    the sequence numbers of those SQS did not take, in stream order. ``digest`` is the pipeline's key digester with
    key_privacy (a job's tenant then travels as its digest)."""
    inserts = [r for r in records
               if r.get("eventName") == "INSERT" and OutboxItem.JOB in r["dynamodb"].get("NewImage", {})]
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for record in inserts:
        lane = priority_of(record["dynamodb"]["NewImage"][OutboxItem.JOB]["S"])
        by_queue.setdefault(queue_for(lane, queue_url, urgent_queue_url), []).append(record)
    failed: list[str] = []
    for queue, lane_inserts in by_queue.items():
        for start in range(0, len(lane_inserts), BATCH):
            failed += _send_chunk(sqs, queue, lane_inserts[start : start + BATCH], fifo, digest)
    order = {r["dynamodb"]["SequenceNumber"]: index for index, r in enumerate(inserts)}
    return sorted(failed, key=order.__getitem__)


def _send_chunk(sqs: Any, queue_url: str, chunk: list[dict[str, Any]], fifo: bool,
                digest: Digest | None) -> list[str]:
    entries = [_entry(i, r["dynamodb"], fifo, digest) for i, r in enumerate(chunk)]
    try:
        response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        refused = {int(f["Id"]) for f in response.get("Failed", [])}
    except Exception:  # the whole chunk is retried from its first record
        refused = set(range(len(chunk)))
    return [chunk[i]["dynamodb"]["SequenceNumber"] for i in sorted(refused)]


def _build() -> tuple[Any, RelayConfig, Digest | None]:
    from . import aws_clients

    config = RelayConfig.from_env()
    digest = None
    if config.key_secret_id:
        from .key_privacy import PrivateKeys

        digest = PrivateKeys(aws_clients.recorder_client("secretsmanager"), config.key_secret_id).digest
    return aws_clients.relay_client(), config, digest


_relay = Once(_build)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    sqs, config, digest = _relay.get()
    failed = relay(event.get("Records", []), sqs, config.queue_url, config.fifo, config.urgent_queue_url, digest)
    return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in failed]}
