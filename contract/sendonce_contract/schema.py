"""The names every part of sendonce reads and writes: the dedupe ledger's attributes and statuses, the dead-letter
queue's message attributes and reason codes, the outbox's attributes, and SES's event types.

The consumer and the recorder write them, the producer writes the outbox, the operator command and the local
report read them: each imports them from here, so none can spell one differently.
"""

from __future__ import annotations

import enum

# The job's field that names its key, and the partition key of the ledger and the outbox.
DEDUPE_KEY = "dedupeKey"
# The dedupe table's key space, in one line: a job's dedupe key (which never starts with white space:
# message.check_key), or the pipeline's own item, whose key starts with this space and names what it is
# (SesStopItem's " ses-stop ...", GuardItem's " guard ..."); the two never meet.
OWN_ITEM_PREFIX = " "
# The job's field that names its tenant (sendonce_contract.tenant), and the ledger's attribute that keeps it.
TENANT_FIELD = "tenant"
# The job's field that names its lane (sendonce_contract.priority).
PRIORITY_FIELD = "priority"
# The job's field that says when it is no longer worth sending (sendonce_contract.message). The ledger's TTL
# attribute, Ledger.EXPIRES_AT, is spelled alike and means the record's own end: both are spelled here.
EXPIRES_AT_FIELD = "expiresAt"
# The job's field that turns SES's open or click tracking on or off for its own message (sendonce_contract.message).
TRACKING_FIELD = "tracking"
# How long a key is remembered unless the construct's dedupe_ttl says otherwise: a cancelled key stays cancelled
# at least this long.
DEFAULT_DEDUPE_TTL_S = 7 * 86_400
# How long a dead worker's send waits for SES's events before the delivery policy decides it. SES publishes a Send
# event as it accepts an email and EventBridge delivers in about a second, retrying a failing target for up to
# 24 hours: five minutes covers normal delivery many times over, and keeps a crashed email at most minutes late.
DEFAULT_EVIDENCE_GRACE_S = 5 * 60


# The metrics every bundled function writes (Embedded Metric Format) and the construct's alarms read.
METRIC_NAMESPACE = "sendonce"
METRIC_DIMENSION = "Pipeline"  # its value is the construct's path
METRIC_LANE_DIMENSION = "Lane"  # with urgent_lane, beside Pipeline: "bulk" or "urgent"
TENANT_DIMENSION = "Tenant"  # with tenant_metrics, beside Pipeline: the job's tenant (its digest with key_privacy)


class Metric:
    """The metrics' names: what the bundled functions write and the construct's alarms and dashboard read."""

    # The consumer's: each record counts once in RECORDS and once in its outcome's metric.
    RECORDS = "Records"
    RECORD_LATENCY = "RecordLatency"  # milliseconds
    KEY_CONFLICTS = "KeyConflicts"
    EMAILS_SENT = "EmailsSent"
    SENT_UNRECORDED = "SentUnrecorded"
    DUPLICATES_SKIPPED = "DuplicatesSkipped"
    CANCELLED = "Cancelled"
    EXPIRED = "Expired"  # a job met after its expiresAt: acknowledged unsent, its key recorded EXPIRED
    UNKNOWN_RECORDS = "UnknownRecords"
    POISON_MESSAGES = "PoisonMessages"
    SES_REFUSALS = "SesRefusals"
    IN_FLIGHT_RETRIES = "InFlightRetries"
    AWAITING_EVIDENCE = "AwaitingEvidence"
    SES_THROTTLES = "SesThrottles"
    QUOTA_EXHAUSTED = "QuotaExhausted"
    SES_STOPPED = "SesStopped"  # a job parked while SES stops the lane's sending (or its tenant's)
    PACED = "Paced"
    SCHEDULED = "Scheduled"
    CONTRACT_TOO_NEW = "ContractTooNew"
    RECEIVES_EXHAUSTED = "ReceivesExhausted"
    RECIPIENTS_NOT_ALLOWED = "RecipientsNotAllowed"
    AMBIGUOUS_SENDS = "AmbiguousSends"
    DEADLINE_DEFERRALS = "DeadlineDeferrals"
    GROUP_BLOCKED = "GroupBlocked"
    LEDGER_THROTTLES = "LedgerThrottles"
    LEDGER_ERRORS = "LedgerErrors"
    ATTACHMENT_READ_RETRIES = "AttachmentReadRetries"
    RECORD_ERRORS = "RecordErrors"
    # The consumer's, from the mis-keyed-producer guard (sendonce_contract.mis_keyed): a key first seen sending what
    # its recipients got under another key in the window, and a job over a recipient's cap.
    SUSPECTED_DOUBLES = "SuspectedDoubles"
    RECIPIENT_CAPPED = "RecipientCapped"
    # The urgent lane's consumer: its work item not written (sendonce_runtime.lane_share), so bulk may lend itself
    # the urgent share longer; the send goes on.
    LANE_WORK_UNWRITTEN = "LaneWorkUnwritten"
    # The consumer's and the outcome publisher's.
    OUTCOME_EVENTS = "OutcomeEvents"
    OUTCOME_EVENTS_FAILED = "OutcomeEventsFailed"
    # The recorder's, besides one per SES event type (SesEventType.metric).
    EVIDENCE_EVENTS = "EvidenceEvents"
    SENDS_CONFIRMED = "SendsConfirmed"
    CONFIRMATION_LATENCY = "ConfirmationLatency"  # milliseconds from SES's acceptance to its first event
    UNDECIDED_SENDS_SETTLED = "UndecidedSendsSettled"
    DOUBLE_SENDS = "DoubleSends"  # the consumer's too, when its SENT record finds another email's id already there
    IGNORED_EVENTS = "IgnoredEvents"
    MALFORMED_EVENTS = "MalformedEvents"
    OTHER_PIPELINE_EVENTS = "OtherPipelineEvents"
    RECORDER_ERRORS = "RecorderErrors"
    UNKNOWN_KEY_EVENTS = "UnknownKeyEvents"
    EXPIRED_KEY_EVENTS = "ExpiredKeyEvents"
    EARLIER_LIFETIME_EVENTS = "EarlierLifetimeEvents"  # an email accepted before the key's record was claimed
    SES_SENDS = "SesSends"
    DELIVERIES = "Deliveries"
    BOUNCES = "Bounces"
    COMPLAINTS = "Complaints"
    REJECTS = "Rejects"
    DELIVERY_DELAYS = "DeliveryDelays"
    RENDERING_FAILURES = "RenderingFailures"
    # The quota watch's (a percentage).
    QUOTA_USED_PERCENT = "QuotaUsedPercent"
    # The schedule watch's, each run: the jobs it sent back from the waiting room, and those due it left there (SQS
    # refused them with no DLQ to move them to, or the run ran out of time: the next run tries them again).
    SCHEDULED_RELEASED = "ScheduledReleased"
    PARKED_RELEASED = "ParkedReleased"  # the schedule watch sent a stop's parked jobs back, SES sending again
    SCHEDULED_LEFT = "ScheduledLeft"


class Status(enum.Enum):
    """A ledger record's ``status``."""

    IN_FLIGHT = "IN_FLIGHT"  # claimed: a worker holds the lease and may be sending
    SENT = "SENT"  # SES accepted it (the consumer's word or SES's own event)
    UNKNOWN = "UNKNOWN"  # a worker died after its send may have left, and the policy is never to resend
    CANCELLED = "CANCELLED"  # the application took the email back before any worker claimed it: never sent
    EXPIRED = "EXPIRED"  # a worker met its job after the job's expiresAt, with no record: never sent


class Ledger:
    """The dedupe table's item attributes: one item per dedupe key."""

    KEY = DEDUPE_KEY
    STATUS = "status"
    OWNER = "owner"  # a token unique to one attempt: every write after a claim is conditional on it
    LEASE_EXPIRES_AT = "leaseExpiresAt"  # epoch ms
    EXPIRES_AT = "expiresAt"  # epoch s, the table's TTL attribute
    PAYLOAD_HASH = "payloadHash"
    TENANT = TENANT_FIELD  # the job's tenant (its digest with key_privacy), for the outcome events
    ATTEMPTS = "attempts"
    # Takeovers whose send SES refused for certain (a throttle, a stop): counted in ATTEMPTS, yet they sent
    # nothing, so the sends that may have gone are ATTEMPTS less these.
    REFUSED_SENDS = "refusedSends"
    CLAIMED_AT = "claimedAt"  # epoch ms, like every *At below but expiresAt
    # When the claim that created the record was written (a takeover keeps it): SES's events of an email accepted
    # before it are of the key's earlier lifetime, forgotten after dedupe_ttl, and never settle this one.
    LIFETIME_STARTED_AT = "lifetimeStartedAt"
    SENT_AT = "sentAt"
    UNKNOWN_AT = "unknownAt"
    SES_MESSAGE_ID = "sesMessageId"
    CANCELLED_AT = "cancelledAt"  # written by the application's cancel, with the CANCELLED status
    # When a worker met the job after its expiresAt (the job's field; EXPIRES_AT above is the record's own TTL).
    FOUND_EXPIRED_AT = "foundExpiredAt"
    # Written by an operator's `sendonce resolve --sent`.
    RESOLVED_AT = "resolvedAt"
    RESOLVED_BY = "resolvedBy"
    # Written by the recorder from SES's events.
    SES_MESSAGE_IDS = "sesMessageIds"  # string set: every id SES reported for the key; two mean a double send
    SES_ACCEPTED_AT = "sesAcceptedAt"  # mail.timestamp
    EVIDENCE_AT = "evidenceAt"  # when the first event was recorded
    DELIVERED_AT = "deliveredAt"
    BOUNCED_AT = "bouncedAt"
    COMPLAINED_AT = "complainedAt"
    REJECTED_AT = "rejectedAt"
    DELAYED_AT = "delayedAt"
    RENDERING_FAILED_AT = "renderingFailedAt"
    BOUNCE_TYPE = "bounceType"
    BOUNCE_SUB_TYPE = "bounceSubType"
    COMPLAINT_FEEDBACK_TYPE = "complaintFeedbackType"
    REJECT_REASON = "rejectReason"
    DELAY_TYPE = "delayType"
    RENDERING_ERROR = "renderingError"


class SesStopItem:
    """A lane's record of an SES stop, in the dedupe table: one item per lane and scope (the account, or one
    tenant), written by the consumer that learns the stop and read by the lane's other instances, so the lane asks
    SES again at most once a minute whatever its number of instances. Its key is one of the pipeline's own items'
    (:data:`OWN_ITEM_PREFIX`), so it never meets a job's record; the outcome stream publishes its stop and its
    resumption."""

    KEY = Ledger.KEY
    KEY_PREFIX = f"{OWN_ITEM_PREFIX}ses-stop "  # then the pipeline, the lane ("jobs" without lanes) and the scope
    KIND = "sesStop"  # paused, setup or quota
    SCOPE = "stopScope"  # "account", or the tenant's name
    LANE = "lane"
    REASON = "reason"  # SES's refusal, addresses taken out
    STOPPED_AT = "stoppedAt"  # epoch ms: when this stop was learned (a new one after a resumption)
    PROBE_AT = "probeAt"  # epoch ms: when the lane may next ask SES
    RESUMED_AT = "resumedAt"  # epoch ms: when SES accepted a send again
    EXPIRES_AT = Ledger.EXPIRES_AT  # the table's TTL: a stop nobody probes for a week is gone

    @classmethod
    def key(cls, pipeline: str | None, lane: str | None, scope: str) -> str:
        """One per pipeline (pipelines may share a table), lane and scope."""
        return f"{cls.KEY_PREFIX}{pipeline or '-'} {lane or 'jobs'} {scope}"


class LaneWorkItem:
    """When the urgent lane last had work, in the dedupe table: written by an urgent consumer as it takes a record
    (once a second an instance at most), read by the bulk lane's instances, which lend themselves the urgent share
    only while it is old (``sendonce_runtime.lane_share``). One item per pipeline, among the pipeline's own items
    (:data:`OWN_ITEM_PREFIX`); with no status, it is no outcome (``outcome_events.transitions``)."""

    KEY = Ledger.KEY
    KEY_PREFIX = f"{OWN_ITEM_PREFIX}lane-work "  # then the pipeline
    KIND = "laneWork"  # the lane: "urgent"
    WORKED_AT = "workedAt"  # epoch ms: when an urgent instance last took a record
    EXPIRES_AT = Ledger.EXPIRES_AT  # the table's TTL: a pipeline's item outlives its urgent lane by a day at most

    @classmethod
    def key(cls, pipeline: str | None) -> str:
        """One per pipeline (pipelines may share a table)."""
        return f"{cls.KEY_PREFIX}{pipeline or '-'}"


class GuardItem:
    """The mis-keyed-producer guard's items, in the dedupe table beside the keys' records (docs: choosing a key).
    Their keys are the pipeline's own items' (:data:`OWN_ITEM_PREFIX`), so they never meet a job's record.

    A content item stands for the recipients and content of one email (their digest) for a window, naming the first
    key that sent it; a key that sends the same within the window is added to its ``suspects`` once, which the
    outcome stream publishes as an ``Email Suspected Double``. A recipient item counts the keys one recipient got in
    one window (the 16-character digest of each)."""

    KEY = Ledger.KEY
    KEY_PREFIX = f"{OWN_ITEM_PREFIX}guard "  # then the pipeline, "content" or "recipient", the digest (the window's)
    KIND = "guard"  # "content" or "recipient"
    CONTENT = "content"
    RECIPIENT = "recipient"
    FIRST_KEY = "firstKey"  # the key the content was first sent under in the window
    TENANT = Ledger.TENANT  # the jobs' tenant (part of the content: SES sends as it), as the ledger keeps it
    WINDOW_ENDS_AT = "windowEndsAt"  # epoch ms: the content item's window; after it, the next key starts a new one
    SUSPECTS = "suspects"  # string set: the keys seen sending the same content in the window
    LAST_SUSPECT_AT = "lastSuspectAt"  # epoch ms: when the newest suspect was seen
    KEYS = "keys"  # string set: a recipient item's counted keys, as digests
    EXPIRES_AT = Ledger.EXPIRES_AT  # the table's TTL

    @classmethod
    def content_key(cls, pipeline: str | None, digest: str) -> str:
        return f"{cls.KEY_PREFIX}{pipeline or '-'} {cls.CONTENT} {digest}"

    @classmethod
    def recipient_key(cls, pipeline: str | None, digest: str, window: int) -> str:
        return f"{cls.KEY_PREFIX}{pipeline or '-'} {cls.RECIPIENT} {digest} {window}"


class SesEventType:
    """One kind of SES event the recorder takes as evidence: everything every part needs to know of it. (A plain
    class, not a NamedTuple: the consumer imports this at every cold start, and a NamedTuple costs more to build.)"""

    __slots__ = ("detail_type", "label", "metric", "name", "outcome_fields", "record_object", "time_attribute")

    def __init__(
        self,
        name: str,  # the record's eventType
        detail_type: str,  # EventBridge's detail-type for it
        record_object: str,  # the name of the event's own object in the record
        time_attribute: str,  # the ledger attribute that records when it happened
        metric: str,  # the recorder's count of these events
        label: str | None,  # what the operator command and the report call the outcome (None: Send is no outcome)
        outcome_fields: tuple[tuple[str, str], ...] = (),  # (ledger attribute, SES's field in the event's object)
    ) -> None:
        self.name = name
        self.detail_type = detail_type
        self.record_object = record_object
        self.time_attribute = time_attribute
        self.metric = metric
        self.label = label
        self.outcome_fields = outcome_fields

    def __repr__(self) -> str:
        return f"SesEventType({self.name!r})"

    @property
    def outcome_attributes(self) -> tuple[str, ...]:
        """The ledger attributes that record what the event says."""
        return tuple(attribute for attribute, _ in self.outcome_fields)


# Every event that proves SES accepted an email or says what became of it (SES Developer Guide, "Contents of event
# data"; EventBridge's detail-types from "Monitoring email sending using Amazon EventBridge").
SES_SEND = SesEventType("Send", "Email Sent", "send", Ledger.SES_ACCEPTED_AT, Metric.SES_SENDS, None)
SES_DELIVERY = SesEventType("Delivery", "Email Delivered", "delivery", Ledger.DELIVERED_AT, Metric.DELIVERIES,
                            "delivered")
SES_BOUNCE = SesEventType("Bounce", "Email Bounced", "bounce", Ledger.BOUNCED_AT, Metric.BOUNCES, "bounced",
                          ((Ledger.BOUNCE_TYPE, "bounceType"), (Ledger.BOUNCE_SUB_TYPE, "bounceSubType")))
SES_COMPLAINT = SesEventType("Complaint", "Email Complaint Received", "complaint", Ledger.COMPLAINED_AT,
                             Metric.COMPLAINTS, "complained",
                             ((Ledger.COMPLAINT_FEEDBACK_TYPE, "complaintFeedbackType"),))
SES_REJECT = SesEventType("Reject", "Email Rejected", "reject", Ledger.REJECTED_AT, Metric.REJECTS, "rejected",
                          ((Ledger.REJECT_REASON, "reason"),))
SES_DELIVERY_DELAY = SesEventType("DeliveryDelay", "Email Delivery Delayed", "deliveryDelay", Ledger.DELAYED_AT,
                                  Metric.DELIVERY_DELAYS, "delayed", ((Ledger.DELAY_TYPE, "delayType"),))
SES_RENDERING_FAILURE = SesEventType("Rendering Failure", "Email Rendering Failed", "failure",
                                     Ledger.RENDERING_FAILED_AT, Metric.RENDERING_FAILURES, "rendering failed",
                                     ((Ledger.RENDERING_ERROR, "errorMessage"),))
SES_EVENT_TYPES = (SES_SEND, SES_DELIVERY, SES_BOUNCE, SES_COMPLAINT, SES_REJECT, SES_DELIVERY_DELAY,
                   SES_RENDERING_FAILURE)
SES_EVENTS_BY_NAME = {event.name: event for event in SES_EVENT_TYPES}
# Events that say nothing about whether an email went out.
IGNORED_SES_EVENT_TYPES = frozenset({"Open", "Click", "Subscription"})


class CopyAttribute:
    """The message attributes a delayed copy of a job carries from the message it replaces (``redelivery``): its
    own state, never in the job's body; ``copy_room`` bounds their size."""

    # How many times the job was put back.
    POSTPONEMENTS = "sendonce.postponements"
    # The receipt handle of the message it replaces, which the copy deletes when it arrives (so a copy whose
    # original was not acknowledged never leaves two messages behind it).
    SUPERSEDES = "sendonce.supersedes"
    # The owner token of a claim its original wrote but never sent under (the claim's answer was lost, or SES
    # refused the send and the release failed): the copy may take that claim over.
    UNSENT_CLAIM = "sendonce.unsentClaim"
    # "owner ses-message-id" of a send SES accepted whose SENT record could not be written; the copy writes it when
    # DynamoDB answers again.
    UNRECORDED_SEND = "sendonce.unrecordedSend"
    # When the job's first message was queued (epoch ms), so a lane's age limit (max_job_age) counts from there
    # whatever the job waited for; a dead letter carries it too, and a redrive keeps it.
    FIRST_QUEUED_AT = "sendonce.firstQueuedAt"
    # On a job a redrive sent back after the mis-keyed-producer guard held it (its reason code): the guard lets it
    # through, as an operator decided. Carried by its copies.
    RELEASED = "sendonce.released"
    # On a copy of a job parked while SES stops sending: when its message was queued, as its first parking found it
    # (epoch ms), so a job waits no longer than the queue keeps a message, then is dead-lettered.
    PARKED_SINCE = "sendonce.parkedSince"
    # On a job the schedule watch sent back from the waiting room once SES said it sends again (epoch ms): it goes
    # to SES whatever its consumer last heard of the stop. Never carried by a copy.
    UNPARKED_AT = "sendonce.unparkedAt"


class DeadLetter:
    """The message attributes the consumer and the recorder attach to what they dead-letter."""

    PREFIX = "sendonce."  # every attribute of ours, a copy's too; a redrive strips them to restore the original job
    REASON_CODE = "sendonce.reasonCode"
    REASON = "sendonce.reason"
    SOURCE_MESSAGE_ID = "sendonce.sourceMessageId"
    SOURCE_QUEUE = "sendonce.sourceQueue"
    DEDUPE_KEY = "sendonce.dedupeKey"
    RECEIVE_COUNT = "sendonce.receiveCount"
    FIRST_QUEUED_AT = CopyAttribute.FIRST_QUEUED_AT  # kept through a stay in the DLQ


# The most unsent-claim tokens one copy carries (each 32 characters): one per delivery in a row whose ledger call
# went unanswered, which the next delivery may take over; more than this in a row is an outage, not a race.
UNSENT_CLAIMS_CARRIED = 8


class ReasonCode(enum.StrEnum):
    """Why a message is in a dead-letter queue: what `sendonce dlq list` groups by and `redrive --reason` takes."""

    INVALID_MESSAGE = "invalid-message"  # the job breaks the message contract: fix the producer
    SES_REFUSED = "ses-refused"  # SES refused the email for good (a bad address, a sender outside the identity)
    MAX_RECEIVES = "max-receives"  # the last receive the queue allows failed again
    MALFORMED_EVENT = "malformed-event"  # the recorder could not read an SES event
    RECIPIENT_NOT_ALLOWED = "recipient-not-allowed"  # a recipient outside the stage's allowed_recipients: not sent
    # Attachments and headers the contract refuses (fix the producer); nothing was sent.
    ATTACHMENT_ENCODING = "attachment-encoding"  # an attachment's content is not base64
    ATTACHMENT_TYPE_REFUSED = "attachment-type-refused"  # a file extension or type SES refuses to send
    ATTACHMENT_TOO_LARGE = "attachment-too-large"  # one attachment, or the message with them, past SES's 40 MB
    ATTACHMENT_MISSING = "attachment-missing"  # an s3 attachment's object does not exist
    ATTACHMENT_BUCKET_REFUSED = "attachment-bucket-refused"  # an s3 attachment outside the pipeline's bucket
    HEADER_REFUSED = "header-refused"  # a header SES or sendonce sets, or one-click unsubscribe without its URL
    SES_PAUSED = "ses-paused"  # parked while SES stopped sending, as long as the queue keeps a message: redrive later
    # Held by the mis-keyed-producer guard, unsent: a redrive sends it (fix the producer's keys first).
    SUSPECTED_DOUBLE = "suspected-double"  # its recipients got the same content under another key in the window
    RECIPIENT_CAP = "recipient-cap"  # a recipient already got the pipeline's cap of emails in the window
    # A message with none of our attributes: SQS moved it itself when maxReceiveCount was reached.
    REDRIVEN_BY_SQS = "redrive: maxReceiveCount reached"


# The mis-keyed-producer guard's holds: a redrive sends such a job back marked released (CopyAttribute.RELEASED), and
# the guard lets it through.
GUARD_HOLDS = frozenset({ReasonCode.SUSPECTED_DOUBLE, ReasonCode.RECIPIENT_CAP})


class OutboxItem:
    """The outbox table's item attributes, written by the producer's ``outbox_put`` and read by the relay."""

    KEY = DEDUPE_KEY
    JOB = "job"  # the SQS body, as the consumer parses it
    CREATED_AT = "createdAt"  # epoch ms
    EXPIRES_AT = "expiresAt"  # epoch s, the table's TTL attribute
    GROUP_ID = "groupId"  # the FIFO message group, when the job queue is FIFO
