"""What the operator command and the local tooling look up in a deployed stack: the pipeline's output ids, what
each output's description says it is, and the construct ids of the children whose logical ids they search."""

from __future__ import annotations


class ChildId:
    """Construct ids of the pipeline's children that the operator command and the local tooling find in a deployed
    stack (its logical ids contain them). Renaming one replaces its resource on deploy."""

    DEDUPE_TABLE = "DedupeTable"
    QUEUE = "Queue"
    DEAD_LETTER_QUEUE = "DeadLetterQueue"
    KEY_SECRET = "KeySecret"
    URGENT_QUEUE = "UrgentQueue"  # with urgent_lane
    URGENT_DEAD_LETTER_QUEUE = "UrgentDeadLetterQueue"
    URGENT_CONSUMER = "UrgentConsumer"
    ATTACHMENTS_BUCKET = "AttachmentsBucket"  # with attachments_bucket=True
    WAITING_ROOM = "WaitingRoom"  # on a standard queue: where a job scheduled beyond SQS's longest delay waits
    SCHEDULE_WATCH = "ScheduleWatch"  # its function, which EventBridge runs each minute


class OutputId:
    """The pipeline's CfnOutput ids."""

    DEDUPE_TABLE_NAME = "DedupeTableName"
    QUEUE_URL = "QueueUrl"
    DEAD_LETTER_QUEUE_URL = "DeadLetterQueueUrl"
    DEDUPE_TTL_SECONDS = "DedupeTtlSeconds"
    EVIDENCE_GRACE_SECONDS = "EvidenceGraceSeconds"
    KEY_SECRET_ARN = "KeySecretArn"
    OUTBOX_TABLE_NAME = "OutboxTableName"
    URGENT_QUEUE_URL = "UrgentQueueUrl"
    URGENT_DEAD_LETTER_QUEUE_URL = "UrgentDeadLetterQueueUrl"
    ATTACHMENTS_BUCKET_NAME = "AttachmentsBucketName"


class OutputPart:
    """What an output's description says it is: ``sendonce:<pipeline path>:<part>``, which `sendonce --stack`
    reads to find a pipeline's parts."""

    TABLE = "table"
    QUEUE = "queue"
    DLQ = "dlq"
    DEDUPE_TTL = "dedupe-ttl"
    EVIDENCE_GRACE = "evidence-grace"
    KEY_SECRET = "key-secret"
    OUTBOX = "outbox"
    URGENT_QUEUE = "urgent-queue"
    URGENT_DLQ = "urgent-dlq"
    ATTACHMENTS = "attachments"


OUTPUT_PREFIX = "sendonce:"


def output_description(pipeline_path: str, part: str) -> str:
    return f"{OUTPUT_PREFIX}{pipeline_path}:{part}"
