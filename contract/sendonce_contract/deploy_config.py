"""What crosses the deploy boundary: the environment of each bundled function, one typed config per function.

The construct builds a config from its props and calls :meth:`to_env` for the function's ``environment``; the
function reads it back once with :meth:`from_env`; the local tooling, the bench and the tests read a deployed
function's environment the same way. Every ``SENDONCE_*`` name is spelled here and nowhere else, and so is the
consumer's time budget, derived once from the function timeout. The other bundled functions' configs are in
:mod:`sendonce_contract.companion_configs`, apart so that the consumer's cold start does not build them.

No dependency: the Lambda bundle ships this module.
"""

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, NamedTuple, Self

from .delivery import DeliveryPolicy
from .env_settings import FLAG, FLAG_WHEN_ON, INTEGER, NUMBER, TEXT, Codec, Nested, Var, from_env, to_env
from .mis_keyed import OnSuspectedDouble
from .schema import DEFAULT_DEDUPE_TTL_S

if TYPE_CHECKING:
    from .allowed_recipients import AllowedRecipients

# No postponed annotations: the configs' fields are real types whose metadata declares each variable and codec
# (read without the typing module's parsing), and which the API reference resolves. One exception: the allow list's
# type is named as a string, so its module is imported (and, from a source-only asset, compiled) only by a stage
# that has one (:func:`_allowed_recipients`).


class Env:
    """The environment variables of the bundled functions."""

    TABLE_NAME = "SENDONCE_TABLE_NAME"  # the dedupe ledger
    DLQ_URL = "SENDONCE_DLQ_URL"  # the job queue's dead-letter queue
    URGENT_DLQ_URL = "SENDONCE_URGENT_DLQ_URL"  # the urgent lane's, for the schedule watch
    DELIVERY = "SENDONCE_DELIVERY"
    DEDUPE_TTL_SECONDS = "SENDONCE_DEDUPE_TTL_SECONDS"
    PARALLELISM = "SENDONCE_PARALLELISM"
    FIFO = "SENDONCE_FIFO"
    PIPELINE_NAME = "SENDONCE_PIPELINE_NAME"  # the metrics' Pipeline dimension
    QUEUE_URL = "SENDONCE_QUEUE_URL"  # the job queue
    CONFIGURATION_SET = "SENDONCE_CONFIGURATION_SET"
    KEY_SECRET_ARN = "SENDONCE_KEY_SECRET_ARN"
    ALLOWED_RECIPIENTS = "SENDONCE_ALLOWED_RECIPIENTS"
    SES_CONNECT_TIMEOUT_S = "SENDONCE_SES_CONNECT_TIMEOUT_S"
    SES_READ_TIMEOUT_S = "SENDONCE_SES_READ_TIMEOUT_S"
    LEDGER_BUDGET_MS = "SENDONCE_LEDGER_BUDGET_MS"
    LEASE_MARGIN_MS = "SENDONCE_LEASE_MARGIN_MS"
    MAX_SEND_RATE = "SENDONCE_MAX_SEND_RATE"
    PLANNED_SEND_RATE = "SENDONCE_PLANNED_SEND_RATE"  # the pipeline's whole rate, which SES's MaxSendRate may cap
    MAX_RECEIVE_COUNT = "SENDONCE_MAX_RECEIVE_COUNT"
    OUTCOME_BUS = "SENDONCE_OUTCOME_BUS"
    PIPELINE_TAG = "SENDONCE_PIPELINE_TAG"  # tags every email and outcome event of one pipeline
    EVIDENCE_GRACE_MS = "SENDONCE_EVIDENCE_GRACE_MS"
    EVIDENCE_DLQ_URL = "SENDONCE_EVIDENCE_DLQ_URL"  # the recorder's dead-letter queue
    ATTACHMENTS_BUCKET = "SENDONCE_ATTACHMENTS_BUCKET"  # the only bucket a job's attachments may be read from
    URGENT_QUEUE_URL = "SENDONCE_URGENT_QUEUE_URL"  # the urgent lane's queue: where relays route urgent jobs
    LANE = "SENDONCE_LANE"  # which lane a consumer serves, with urgent_lane (the metrics' Lane dimension)
    LENT_SEND_RATE = "SENDONCE_LENT_SEND_RATE"  # a bulk instance's share of the urgent lane's rate, while it idles
    SES_TENANTS = "SENDONCE_SES_TENANTS"  # a job's tenant is also SendEmail's TenantName
    TENANT_METRICS = "SENDONCE_TENANT_METRICS"  # the consumer's metrics also by Tenant
    SENDER_IDENTITY = "SENDONCE_SENDER_IDENTITY"  # the pipeline's SES identity: a domain or an address
    QUEUE_RETENTION_S = "SENDONCE_QUEUE_RETENTION_S"  # how long the job queue keeps a message
    MAX_JOB_AGE_S = "SENDONCE_MAX_JOB_AGE_S"  # the lane's age limit for a job with no expiresAt
    # The mis-keyed-producer guard (sendonce_contract.mis_keyed): its mode, its cap and its window.
    SUSPECTED_DOUBLES = "SENDONCE_SUSPECTED_DOUBLES"
    RECIPIENT_CAP = "SENDONCE_RECIPIENT_CAP"
    GUARD_WINDOW_S = "SENDONCE_GUARD_WINDOW_S"
    WAITING_ROOM_TABLE = "SENDONCE_WAITING_ROOM_TABLE"  # where a job scheduled beyond SQS's longest delay waits


# The most calls besides the send one record makes in a row: claim, release after a refusal, dead-letter send.
LEDGER_CALLS_PER_RECORD = 3


class TimeBudget(NamedTuple):
    """How the consumer splits its time, so a send never outlives the invocation nor a lease its worker.

    Derived once from the function timeout (:meth:`for_function_timeout`) by the construct; the consumer reads it.
    The defaults are the budget of any function timeout of 20 s or more.
    """

    ses_connect_timeout_s: Annotated[float, Var(Env.SES_CONNECT_TIMEOUT_S, NUMBER)] = 2.0
    ses_read_timeout_s: Annotated[float, Var(Env.SES_READ_TIMEOUT_S, NUMBER)] = 5.0
    # What a claim and the completion write need on top of the send, when deciding whether to start a record.
    ledger_budget_ms: Annotated[int, Var(Env.LEDGER_BUDGET_MS, INTEGER)] = 6_000
    # A lease outlives the invocation by this much, so it expires only once its worker is surely dead.
    lease_margin_ms: Annotated[int, Var(Env.LEASE_MARGIN_MS, INTEGER)] = 10_000

    @classmethod
    def for_function_timeout(cls, function_timeout_s: float) -> Self:
        """SES gets at most a quarter of the function timeout to answer (5 s at most: it answers in ~100 ms), a
        tenth to connect; the ledger's calls (three at most in a row, each with no SDK retry) three tenths, 6 s at
        most. The lease outlives the deadline by at most twice the function timeout, well inside the visibility
        timeout (6x), so a redelivered message finds a dead worker's lease expired."""
        return cls(
            ses_connect_timeout_s=min(2.0, function_timeout_s / 10),
            ses_read_timeout_s=min(5.0, function_timeout_s / 4),
            ledger_budget_ms=int(min(6000.0, function_timeout_s * 300)),
            lease_margin_ms=int(min(10_000.0, function_timeout_s * 2000)),
        )

    @property
    def ledger_call_timeouts_s(self) -> tuple[float, float]:
        """(connect, read) for one ledger or DLQ call, with no SDK retry: the calls a record makes besides the send
        (a claim, then a completion, or a release and a dead-letter send) all fit ``ledger_budget_ms``."""
        per_call_s = self.ledger_budget_ms / 1000 / LEDGER_CALLS_PER_RECORD
        # Connecting gets the larger share: at 30 s it outlasts one lost SYN (Linux retransmits after 1 s), while
        # DynamoDB answers a write in milliseconds.
        return per_call_s * 0.6, per_call_s * 0.4

    @property
    def ledger_call_ms(self) -> int:
        """The longest one ledger or queue call can take."""
        return int(sum(self.ledger_call_timeouts_s) * 1000)

    @property
    def attachment_read_budget_ms(self) -> int:
        """The least time left to start reading one s3 attachment: the read (at the ledger's call timeouts, which
        bound each wait for bytes) and then the whole record."""
        return self.record_budget_ms + self.ledger_call_ms

    @property
    def record_budget_ms(self) -> int:
        """The least time a record needs: a claim, a send that may run to its timeouts, and a completion."""
        return int((self.ses_connect_timeout_s + self.ses_read_timeout_s) * 1000) + self.ledger_budget_ms


DEFAULT_TIME_BUDGET = TimeBudget()


# Of the time a record may wait for its send slot, the share pacing plans with: the rest is kept for the record's
# own calls before it asks for its slot (the copy's delete of its original, parsing).
PLANNED_WAIT_SHARE = 0.9


def planned_wait_s(function_timeout_ms: float, record_budget_ms: int) -> float:
    """How long a record of an invocation of ``function_timeout_ms`` can be planned to wait for its send slot:
    what is left once its record budget is kept for the send, less a tenth (docs: sending rate)."""
    return max(0.0, (function_timeout_ms - record_budget_ms) / 1000 * PLANNED_WAIT_SHARE)


# A paced instance holds no more received jobs than it sends in this long (one at least): a job SQS hands out
# waits about this at most for its slot, so a fair queue's order (a quiet tenant's job first) reaches SES within
# seconds, where batches sized to a whole function timeout held a quiet tenant's job behind up to ten of a noisy
# one's (docs: sending rate).
SEND_HOLD_S = 1.0
# A paced instance that sent asks for its next batch this long before its next send slot: the receive, the
# invocation and a record's steps before its slot fit in it, so the batch's first record finds its slot ready
# and the instance loses no sending time, while a job received waits this little more for it.
RECEIVE_LEAD_S = 0.1


# An invocation holding back for its instance's next slot ends this long before its deadline at the latest, so
# it answers in time (as a share of the function timeout, at most a second).
ANSWER_MARGIN_SHARE = 0.05
MAX_ANSWER_MARGIN_MS = 1000


def answer_margin_ms(function_timeout_ms: float) -> float:
    """How long before its deadline an invocation holding back for its instance's next slot ends at the latest."""
    return min(MAX_ANSWER_MARGIN_MS, function_timeout_ms * ANSWER_MARGIN_SHARE)


def sends_per_invocation(rate_per_instance: float, function_timeout_s: float) -> int:
    """The one-recipient jobs an instance paced at ``rate_per_instance`` is handed in one invocation: as many as it
    sends in the hold (:data:`SEND_HOLD_S`), and no more than it can send in one invocation received
    :data:`RECEIVE_LEAD_S` before its next slot (that slot, and those the rate gives while a record can still
    wait for its own). The construct sizes a paced pipeline's batches to it, so a batch is never received to be
    put back, nor held long before it can be sent (at least one job a batch)."""
    budget = TimeBudget.for_function_timeout(function_timeout_s)
    wait_s = planned_wait_s(function_timeout_s * 1000, budget.record_budget_ms) - RECEIVE_LEAD_S
    held = int(rate_per_instance * SEND_HOLD_S + 1e-9)  # at exactly n a hold, n jobs
    return max(1, min(held, int(1 + rate_per_instance * max(0.0, wait_s))))


def _allowed_recipients(text: str) -> "AllowedRecipients":
    # Imported (and, from a source-only asset, compiled) only by a stage that has an allow list.
    from .allowed_recipients import parse_entries, split_env

    return parse_entries(split_env(text))


DELIVERY = Codec(lambda policy: policy.value, DeliveryPolicy)
SUSPECTED_DOUBLES = Codec(lambda mode: mode.value, OnSuspectedDouble)
AT_LEAST_ONE = Codec(INTEGER.encode, lambda text: max(1, int(text)))
ALLOWED_RECIPIENTS = Codec(lambda recipients: recipients.to_env(), _allowed_recipients)


class ConsumerConfig(NamedTuple):
    """The consumer's (``sendonce_runtime.handler.handler``) environment. Each field declares its variable and codec
    (:mod:`sendonce_contract.env_settings`); a field marked as a prop (:data:`PROP_FIELDS`) is the construct's prop
    of that name, passed through as it is."""

    table_name: Annotated[str, Var(Env.TABLE_NAME, TEXT, required=True)]
    dead_letter_queue_url: Annotated[str, Var(Env.DLQ_URL, TEXT, required=True)]
    delivery: Annotated[DeliveryPolicy, Var(Env.DELIVERY, DELIVERY)] = DeliveryPolicy.RESEND_WITHOUT_EVIDENCE
    dedupe_ttl_s: Annotated[int, Var(Env.DEDUPE_TTL_SECONDS, INTEGER)] = DEFAULT_DEDUPE_TTL_S
    parallelism: Annotated[int, Var(Env.PARALLELISM, AT_LEAST_ONE)] = 1
    fifo: Annotated[bool, Var(Env.FIFO, FLAG)] = False
    configuration_set: Annotated[str | None, Var(Env.CONFIGURATION_SET, TEXT)] = None
    # The metrics' Pipeline dimension; no metrics without it.
    pipeline_name: Annotated[str | None, Var(Env.PIPELINE_NAME, TEXT)] = None
    # Recipients a second per execution environment; None for no limit.
    max_send_rate: Annotated[float | None, Var(Env.MAX_SEND_RATE, NUMBER)] = None
    # The pipeline's whole planned rate (send_rate, or max_send_rate over its instances): every bucket scales down
    # by SES's MaxSendRate over it when SES allows less (``ses_rate``); None: no ceiling read.
    planned_send_rate: Annotated[float | None, Var(Env.PLANNED_SEND_RATE, NUMBER)] = None
    # From the function timeout; None when the construct could not read it at synth (the default budget applies).
    time_budget: Annotated[TimeBudget | None, Nested(TimeBudget)] = None
    # SES's events are the evidence, and they are on exactly when a grace period is set: a send whose worker died
    # is decided this long after its lease expired, by SES's events if any came, by the delivery policy if none did.
    evidence_grace_ms: Annotated[int | None, Var(Env.EVIDENCE_GRACE_MS, INTEGER)] = None
    # Tags every email (and outcome event), so the pipeline's event rule matches its events only.
    pipeline_tag: Annotated[str | None, Var(Env.PIPELINE_TAG, TEXT)] = None
    # The job queue: a delayed copy of a throttled job, an earlier redelivery.
    queue_url: Annotated[str | None, Var(Env.QUEUE_URL, TEXT)] = None
    # The queue's; the last receive dead-letters a failure with its reason.
    max_receive_count: Annotated[int | None, Var(Env.MAX_RECEIVE_COUNT, INTEGER)] = None
    # Where Email Dead-Lettered events go (None: outcome events are off).
    outcome_bus: Annotated[str | None, Var(Env.OUTCOME_BUS, TEXT)] = None
    # key_privacy: the secret whose HMAC of each key stands for it.
    key_secret_id: Annotated[str | None, Var(Env.KEY_SECRET_ARN, TEXT)] = None
    # A stage's only recipients; None allows all.
    allowed_recipients: Annotated["AllowedRecipients | None",
                                  Var(Env.ALLOWED_RECIPIENTS, ALLOWED_RECIPIENTS, reads_empty=True)] = None
    # The claim-check bucket; None: attachments are inline only.
    attachments_bucket: Annotated[str | None, Var(Env.ATTACHMENTS_BUCKET, TEXT)] = None
    # With urgent_lane: "bulk" or "urgent" (the Lane dimension); None without lanes.
    lane: Annotated[str | None, Var(Env.LANE, TEXT)] = None
    # The bulk lane's consumer, with urgent_lane and a send rate: while the urgent lane's work item says it is idle
    # (sendonce_runtime.lane_share), each instance also sends this many recipients a second on top of max_send_rate.
    lent_send_rate: Annotated[float | None, Var(Env.LENT_SEND_RATE, NUMBER)] = None
    # A job's tenant is sent as SendEmail's TenantName (SES tenants).
    ses_tenants: Annotated[bool, Var(Env.SES_TENANTS, FLAG_WHEN_ON)] = False
    # The consumer's metrics are also written per tenant (a dimension value each).
    tenant_metrics: Annotated[bool, Var(Env.TENANT_METRICS, FLAG_WHEN_ON)] = False
    # The SES identity the grant names: SES refusing it as unverified is the pipeline's setup, not the job's.
    sender_identity: Annotated[str | None, Var(Env.SENDER_IDENTITY, TEXT)] = None
    # The job queue's retention: a job parked while SES stops sending is dead-lettered before a copy outlives it.
    queue_retention_s: Annotated[int | None, Var(Env.QUEUE_RETENTION_S, INTEGER)] = None
    # The lane's age limit (max_job_age, or urgent_max_job_age on the urgent lane's consumer): a job with no expiresAt
    # expires this long after its first message was queued. None: only a job's own expiresAt.
    max_job_age_s: Annotated[int | None, Var(Env.MAX_JOB_AGE_S, INTEGER)] = None
    # The mis-keyed-producer guard: same content to the same recipients under another key in the window flagged or
    # held; more than the cap of keys to one recipient in a window held. None: off.
    suspected_doubles: Annotated[OnSuspectedDouble | None, Var(Env.SUSPECTED_DOUBLES, SUSPECTED_DOUBLES)] = None
    recipient_cap: Annotated[int | None, Var(Env.RECIPIENT_CAP, INTEGER)] = None
    guard_window_s: Annotated[int | None, Var(Env.GUARD_WINDOW_S, INTEGER)] = None
    # The waiting room: a job whose sendAt is further ahead than SQS can delay a message waits there, at a fixed
    # cost, until the schedule watch sends it back (``waiting_room``). None: it waits as delayed copies.
    waiting_room_table: Annotated[str | None, Var(Env.WAITING_ROOM_TABLE, TEXT)] = None

    @property
    def guarded(self) -> bool:
        """Whether the mis-keyed-producer guard runs."""
        return self.suspected_doubles is not None or self.recipient_cap is not None

    @property
    def budget(self) -> TimeBudget:
        return self.time_budget or DEFAULT_TIME_BUDGET

    @property
    def ses_events(self) -> bool:
        return self.evidence_grace_ms is not None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)

    @staticmethod
    def is_consumer_env(env: Mapping[str, str]) -> bool:
        """Whether a function's environment is a consumer's (the only one with the job queue's DLQ)."""
        return Env.DLQ_URL in env


# The consumer's settings that are the construct's props of the same name, passed as they are.
PROP_FIELDS = ("delivery", "fifo", "allowed_recipients", "ses_tenants", "tenant_metrics", "suspected_doubles",
               "recipient_cap")
