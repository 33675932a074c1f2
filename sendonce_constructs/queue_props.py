"""The props of ``SendOnceEmailQueue``, each declared once: its type, its default (or the derivation that computes
it), and one text saying what it does and the rules checked at synth. The constructor takes them as
``**props: Unpack[SendOnceEmailQueueProps]``; ``props.resolve_props`` fills the defaults in and runs the rules
(``rules.RULES``); ``tools/reference_docs.py`` renders the construct's docstring, the docs' prop tables, the
resolved props (``resolved_props.PipelineProps``) and their readings (``prop_readings.PropReadings``) from here (a
test holds them to it). Derived props are computed in the order they are declared here.

No postponed annotations here: the declarations are read at run time (``declared_props``).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Final, Required, TypedDict, get_type_hints

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs

from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.job_lifetime import MAX_JOB_AGE_S, MIN_JOB_AGE_S
from sendonce_contract.mis_keyed import (
    MAX_GUARD_WINDOW_S,
    MAX_RECIPIENT_CAP,
    MIN_GUARD_WINDOW_S,
    MIN_RECIPIENT_CAP,
    OnSuspectedDouble,
)
from sendonce_contract.schema import DEDUPE_KEY, EXPIRES_AT_FIELD, ReasonCode
from sendonce_contract.sqs_limits import SQS_MAX_MESSAGE_BYTES

from . import derivations
from .rules import (
    DEFAULT_QUOTA_ALARM_PERCENT,
    MAX_DELIVERY_S,
    MAX_PACE_PER_INSTANCE,
    MAX_SQS_MIN_POLLERS,
    MAX_SQS_POLLERS,
    MIN_DELIVERY_S,
    MIN_SQS_POLLERS,
    RANGES,
)


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


REQUIRED: Final = _Marker("REQUIRED")  # no default: the prop must be given


@dataclass(frozen=True)
class Derived:
    """A default computed from other props by ``compute``, a function of ``derivations``, when the prop is absent."""

    compute: Callable[..., object]

    def __repr__(self) -> str:
        return f"Derived({self.compute.__name__})"


@dataclass(frozen=True)
class Prop:
    """One prop's declaration: ``default`` is the value used when the prop is absent (or None), ``REQUIRED`` or
    ``Derived``; ``default_doc`` says it in words; ``text`` says what the prop does and the rules checked at synth,
    once: the construct's docstring, the props reference and the synth errors that quote it are all rendered from it
    (Markdown backticks; the docstring's renderer turns them into RST). The rules themselves are in ``rules``, each
    naming the props it reads.
    """

    default: object
    default_doc: str
    text: str

    def __repr__(self) -> str:
        # What the API reference shows in each prop's type: short, and the same on every run.
        return f"Prop(default={self.default_doc!r})"


class SendOnceEmailQueueProps(TypedDict, total=False):
    """The keyword arguments of ``SendOnceEmailQueue``; see its docstring or the props reference."""

    sender: Required[Annotated[
        str | ses.IEmailIdentity, Prop(
            default=REQUIRED,
            default_doc="required",
            text="the SES identity to send from: a domain (`\"example.com\"`), a bare address, or an "
            "`aws_ses.IEmailIdentity`; the IAM grant names this identity's ARN only",
        )]]
    from_addresses: Annotated[
        Sequence[str] | None, Prop(
            default=None,
            default_doc="any address of the domain identity, or the address identity itself",
            text="the From addresses allowed (`ses:FromAddress` condition): bare addresses of the sender identity",
        )]
    configuration_set: Annotated[
        str | ses.IConfigurationSet | None, Prop(
            default=None,
            default_doc="one the construct makes",
            text="an SES configuration set used for every send (name or `IConfigurationSet`), granted and passed to "
            "the consumer; with `ses_events` the construct adds its EventBridge event destination to it",
        )]
    ses_events: Annotated[
        bool, Prop(
            default=True,
            default_doc="True",
            text="make SES's own events the evidence of each send: a configuration set with an event destination to "
            "the default event bus, a rule matching this pipeline's `sendonce-pipeline` tag, a queue and DLQ, and the "
            "bundled recorder",
        )]
    evidence_grace_period: Annotated[
        Duration | None, Prop(
            default=Derived(derivations.evidence_grace_period),
            default_doc="5 minutes",
            text="how long after a dead worker's lease expired its send waits for SES's events before the delivery "
            "policy decides it, 10 s to 12 h; with `ses_events` the retention period must cover 2 x "
            "`visibility_timeout` + this, and `max_receive_count` must be at least 3",
        )]
    template_names: Annotated[
        Sequence[str] | None, Prop(
            default=(),
            default_doc="none",
            text="SES templates the jobs may use, each name by SES's rule (1-64 letters, digits, `_`, `-`); each "
            "template's ARN is added to the grant",
        )]
    allow_raw_messages: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="grant `ses:SendRawEmail`, which jobs with `raw` MIME content need",
        )]
    function_timeout: Annotated[
        Duration | None, Prop(
            default=Duration.seconds(30),
            default_doc="30 s",
            text="the consumer's timeout; it also sizes the consumer's SES timeouts, lease margin and ledger call "
            "timeouts (no SDK retries; every call a record makes fits before the deadline guard, at the shortest "
            "timeout too)",
        )]
    memory_size: Annotated[
        int | None, Prop(
            default=256,
            default_doc="256 MB",
            text="the consumer's memory in MB",
        )]
    architecture: Annotated[
        lambda_.Architecture | None, Prop(
            default=lambda_.Architecture.ARM_64,
            default_doc="ARM64",
            text="the instruction set of every bundled function",
        )]
    runtime: Annotated[
        lambda_.Runtime | None, Prop(
            default=Derived(derivations.runtime),
            default_doc="newest Python runtime aws-cdk-lib knows",
            text="the Python runtime of every bundled function",
        )]
    precompiled_bytecode: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="ship the bundled functions' bytecode, compiled at synth, so that a cold start loads it instead of "
            "compiling every module (Lambda's asset folder is read-only; see the costs page and BENCHMARKS.md, "
            "section 3); the asset is about three times larger; `runtime` must pin the Python running synth "
            "(`PYTHON_3_11` under Python 3.11) on every machine that synthesizes the app, or synth fails",
        )]
    log_retention: Annotated[
        logs.RetentionDays | None, Prop(
            default=logs.RetentionDays.ONE_MONTH,
            default_doc="one month",
            text="how long the consumer's logs are kept, in the function's own log group",
        )]
    tracing: Annotated[
        lambda_.Tracing | None, Prop(
            default=None,
            default_doc="off",
            text="X-Ray tracing for the consumer: `lambda_.Tracing.ACTIVE` turns it on",
        )]
    visibility_timeout: Annotated[
        Duration | None, Prop(
            default=Derived(derivations.visibility_timeout),
            default_doc="6 x `function_timeout` + `max_batching_window`",
            text="the job queue's visibility timeout, at most 12 h; smaller than the default fails synth",
        )]
    max_batching_window: Annotated[
        Duration | None, Prop(
            default=None,
            default_doc="none",
            text="how long the event source gathers a batch, 0 to 300 s; not with `fifo`",
        )]
    max_concurrency: Annotated[
        int | None, Prop(
            default=None,
            default_doc="none",
            text="cap on concurrent consumer invocations, e.g. to stay under SES's rate; with `send_rate` it must be "
            "known at synth, and the event source runs at most floor(rate) instances, so each paces at one email a "
            "second or more (two at least; docs: sending rate): a cap above that warns at synth",
        )]
    send_rate: Annotated[
        float | None, Prop(
            default=None,
            default_doc="none",
            text="the rate to give: recipients per second this pipeline may send, all its instances together (SES's "
            "quotas count recipients: to + cc + bcc), above 0; its share of the account's SES maximum send rate "
            "(SES's own `MaxSendRate` scales it down when lower: docs: sending rate); each instance is paced at "
            "`send_rate` / `max_concurrency` (over the instances that run, where fewer), so it needs `max_concurrency` "
            f"known at synth, and at most {MAX_PACE_PER_INSTANCE} a second an instance; with `urgent_lane`, "
            "`urgent_share` of it is the urgent lane's (docs: the urgent lane); not with `max_send_rate`",
        )]
    max_send_rate: Annotated[
        float | None, Prop(
            default=Derived(derivations.max_send_rate),
            default_doc="none",
            text="Deprecated: give `send_rate` (with `max_concurrency`) instead; recipients per second per consumer "
            "instance: a token bucket of a second's worth (one token at least) before each send takes one token per "
            "recipient (as SES's quotas count them), so parallel sends stay under the account's SES rate; the "
            "pipeline's peak is this times the instances that run, with no bound without `max_concurrency`; a job "
            "with more recipients than the bucket holds waits for a full bucket and goes; not with `send_rate` or "
            "`urgent_lane`",
        )]
    batch_size: Annotated[
        int | None, Prop(
            default=Derived(derivations.batch_size),
            default_doc="10; with a send rate, what one instance sends in a second (at least 1)",
            text="records per invocation, 1 to 10 (FIFO) or 10000; above 10 needs a `max_batching_window`",
        )]
    parallelism: Annotated[
        int | None, Prop(
            default=Derived(derivations.parallelism),
            default_doc="the batch size, at most 10",
            text="records of one batch handled at once by one invocation (threads sharing one client per service), at "
            "most `batch_size`; 1 turns it off",
        )]
    urgent_lane: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="a second job queue (`urgent_queue`, with its own DLQ) and consumer of the same kind (FIFO, "
            "encryption, retention) for jobs with `\"priority\": \"urgent\"`, so they never wait behind bulk mail, "
            "with one dedupe ledger for both; the producer, the outboxes and `sendonce dlq redrive` route a job by "
            "its `priority`, and a job on the other lane's queue is still sent; with `send_rate` the lane keeps "
            "`urgent_share` of the rate, lent to bulk while it is idle; not with `max_send_rate` (give `send_rate`)",
        )]
    urgent_share: Annotated[
        float | None, Prop(
            default=0.2,
            default_doc="0.2",
            text="the urgent lane's share of `send_rate`, above 0 and below 1: bulk never takes it, and borrows it "
            "while the urgent lane is idle (it took no job for 5 s); only with `urgent_lane` and `send_rate`",
        )]
    max_job_age: Annotated[
        Duration | None, Prop(
            default=None,
            default_doc=f"none (only a job's own `{EXPIRES_AT_FIELD}`)",
            text=f"the (bulk) lane's age limit, {MIN_JOB_AGE_S} s to {MAX_JOB_AGE_S // 86_400} days: a job with no "
            f"`{EXPIRES_AT_FIELD}` (its own wins) is not sent once this long has passed since its first message was "
            "queued (a backlog, an SES stop, a throttle, a redrive; its delayed copies and dead letters carry that "
            "time, and a redrive keeps it); it is acknowledged unsent and its key recorded `EXPIRED` in one "
            f"conditional write (`Expired` metric, `Email Expired` event), as a job past its own `{EXPIRES_AT_FIELD}` "
            "is",
        )]
    urgent_max_job_age: Annotated[
        Duration | None, Prop(
            default=None,
            default_doc=f"none (only a job's own `{EXPIRES_AT_FIELD}`)",
            text=f"the urgent lane's age limit, {MIN_JOB_AGE_S} s to {MAX_JOB_AGE_S // 86_400} days, as `max_job_age` "
            "(one-time codes and reset links: minutes); only with `urgent_lane`",
        )]
    max_delivery_duration: Annotated[
        Duration | None, Prop(
            default=None,
            default_doc="SES's, 14 hours",
            text="how long SES keeps trying to deliver the (bulk) lane's emails once it accepted them, "
            f"{MIN_DELIVERY_S // 60} minutes to {MAX_DELIVERY_S // 3600} hours (the configuration set's "
            "`MaxDeliverySeconds`): past it SES gives up and publishes a bounce, so a receiving server that is down "
            "for hours does not take the email hours late; set on the configuration set the construct makes (not with "
            "`configuration_set` or `ses_events=False`)",
        )]
    urgent_max_delivery_duration: Annotated[
        Duration | None, Prop(
            default=None,
            default_doc="as the bulk lane's",
            text=f"the urgent lane's, as `max_delivery_duration` ({MIN_DELIVERY_S // 60} minutes to "
            f"{MAX_DELIVERY_S // 3600} hours, on a configuration set the construct makes), so one-time codes give up "
            "in minutes while receipts keep trying for hours; only with `urgent_lane`; the urgent lane sends through "
            "a configuration set of its own beside the one the construct makes (publishing SES's events as the other "
            "does; SES charges nothing for a set), and with the user's own `configuration_set` both lanes send "
            "through that",
        )]
    provisioned_pollers: Annotated[
        lambda_.ProvisionedPollerConfig | None, Prop(
            default=None,
            default_doc="none (Lambda scales the event source's pollers with the backlog)",
            text="the (bulk) lane's event source in provisioned mode, an `aws_lambda.ProvisionedPollerConfig`: "
            f"`minimum_pollers` ({MIN_SQS_POLLERS} to {MAX_SQS_MIN_POLLERS}) always ready, scaling to "
            f"`maximum_pollers` ({MIN_SQS_POLLERS} to {MAX_SQS_POLLERS}, at least the minimum), for a lower, steadier "
            "latency when a burst arrives after a quiet spell; it costs money while idle: AWS bills each poller "
            "provisioned (at least `minimum_pollers`) every hour, as event poller units on Lambda's pricing page, "
            "whether jobs arrive or not; not with `max_concurrency` (so not with `send_rate`): Lambda takes one or "
            "the other",
        )]
    urgent_provisioned_pollers: Annotated[
        lambda_.ProvisionedPollerConfig | None, Prop(
            default=None,
            default_doc="none (Lambda scales the event source's pollers with the backlog)",
            text="the urgent lane's event source in provisioned mode, as `provisioned_pollers`: a latency floor for "
            "one-time codes and reset links after a quiet spell, billed every hour as `provisioned_pollers` is; only "
            "with `urgent_lane`",
        )]
    max_receive_count: Annotated[
        int | None, Prop(
            default=5,
            default_doc="5",
            text="deliveries before a message moves to the DLQ: a job failing on its last allowed receive is "
            f"dead-lettered by the consumer with its reason (`{ReasonCode.MAX_RECEIVES.value}`) rather than moved by "
            "SQS with none; below 1 fails (below 3 with `ses_events`: a dead worker's job is received once to wait "
            "for SES's events and once to be decided); below 5 warns (acknowledgeable: see the errors and warnings "
            "reference)",
        )]
    retention_period: Annotated[
        Duration | None, Prop(
            default=Duration.days(4),
            default_doc="4 days",
            text="how long the job queue keeps a message; the DLQ keeps 14 days",
        )]
    max_message_size_bytes: Annotated[
        int | None, Prop(
            default=None,
            default_doc="256 KiB, set in the template (SQS's own default is 1 MiB since 2025)",
            text=f"the largest message the queue takes, 1024 to {SQS_MAX_MESSAGE_BYTES} bytes (SQS's 1 MiB); a job "
            "may be that less the room a delayed copy's attributes take (about 1.6 KB; the producer's `JobTooLarge` "
            "says so), and larger files go through `attachments_bucket`; its dead-letter queue then takes SQS's "
            "largest, so any job can be dead-lettered with its reason; `batch_size` x (this + 1024 bytes of each "
            "record's envelope) must fit Lambda's 6 MB invocation payload (6291456 bytes)",
        )]
    dedupe_ttl: Annotated[
        Duration | None, Prop(
            default=Derived(derivations.dedupe_ttl),
            default_doc="7 days; with `outbox`, 1 day of stream retention + `retention_period` + the DLQ's 14 days, "
            "in whole days (19 days with the default `retention_period`)",
            text="how long a sent key is remembered; at least `retention_period`: a key forgotten while its message "
            "can still arrive is sent twice",
        )]
    delivery: Annotated[
        DeliveryPolicy, Prop(
            default=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE,
            default_doc="`DeliveryPolicy.RESEND_WITHOUT_EVIDENCE`",
            text="what happens to a send a crash left undecided and SES's events did not settle; `NEVER_RESEND` never "
            "risks a double (see the guarantees page)",
        )]
    fifo: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="use a FIFO job queue and DLQ, order kept per message group",
        )]
    existing_table: Annotated[
        dynamodb.ITable | None, Prop(
            default=None,
            default_doc="a new table",
            text=f"bring your own dedupe table instead (partition key `{DEDUPE_KEY}`, string, no sort key: checked at "
            "synth for a `Table` or `TableV2` defined in the app); its own KMS key, if any, is granted to the "
            "consumer; not with the table props below",
        )]
    removal_policy: Annotated[
        RemovalPolicy | None, Prop(
            default=RemovalPolicy.RETAIN,
            default_doc="RETAIN",
            text="for the dedupe table the construct makes",
        )]
    deletion_protection: Annotated[
        bool | None, Prop(
            default=None,
            default_doc="False",
            text="for the dedupe table the construct makes",
        )]
    encryption: Annotated[
        sqs.QueueEncryption | None, Prop(
            default=Derived(derivations.encryption),
            default_doc="SQS-managed (KMS when `encryption_key` is given)",
            text="queue encryption; `UNENCRYPTED` is refused",
        )]
    encryption_key: Annotated[
        kms.IKey | None, Prop(
            default=None,
            default_doc="none",
            text="a customer-managed KMS key for both queues and the dedupe table, granted to the consumer",
        )]
    alarms: Annotated[
        bool, Prop(
            default=True,
            default_doc="True",
            text="create the default alarms (DLQ not empty, oldest message too old, UNKNOWN records, function errors)",
        )]
    alarm_topic: Annotated[
        sns.ITopic | None, Prop(
            default=None,
            default_doc="none",
            text="an `sns.ITopic` every alarm notifies",
        )]
    oldest_message_alarm_threshold: Annotated[
        Duration | None, Prop(
            default=Duration.minutes(15),
            default_doc="15 minutes",
            text="the age of the oldest job that raises an alarm",
        )]
    urgent_oldest_message_alarm_threshold: Annotated[
        Duration | None, Prop(
            default=Duration.minutes(1),
            default_doc="1 minute",
            text="the age of the oldest urgent job that raises the `UrgentOldestMessageTooOld` alarm, at most "
            "`oldest_message_alarm_threshold`; only with `urgent_lane`",
        )]
    dashboard: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="draw the pipeline on a CloudWatch dashboard (`.dashboard`)",
        )]
    vpc: Annotated[
        ec2.IVpc | None, Prop(
            default=None,
            default_doc="none",
            text="put every bundled function (consumer, relay, recorder) in this VPC, with the subnets and security "
            "groups below; they need routes or VPC endpoints to DynamoDB, SQS, SES and CloudWatch Logs: selected "
            "subnets with no egress (isolated, or public: a function gets no public address) in a VPC with no "
            "endpoint warn (acknowledgeable: see the errors and warnings reference)",
        )]
    vpc_subnets: Annotated[
        ec2.SubnetSelection | None, Prop(
            default=None,
            default_doc="CDK's choice (private subnets)",
            text="the subnets of every bundled function; needs `vpc`; selected subnets with no egress in a VPC with "
            "no endpoint warn",
        )]
    security_groups: Annotated[
        Sequence[ec2.ISecurityGroup] | None, Prop(
            default=None,
            default_doc="one per function, outbound only",
            text="the security groups of every bundled function; needs `vpc`",
        )]
    reserved_concurrent_executions: Annotated[
        int | None, Prop(
            default=None,
            default_doc="none",
            text="the consumer's reserved concurrency; at least 1 and at least `max_concurrency`",
        )]
    log_level: Annotated[
        lambda_.ApplicationLogLevel | None, Prop(
            default=lambda_.ApplicationLogLevel.INFO,
            default_doc="INFO",
            text="the application log level (`lambda_.ApplicationLogLevel`) of every bundled function",
        )]
    queue_removal_policy: Annotated[
        RemovalPolicy | None, Prop(
            default=RemovalPolicy.RETAIN,
            default_doc="RETAIN",
            text="for the queues the construct makes: RETAIN keeps, when the stack is deleted, jobs not yet sent",
        )]
    log_removal_policy: Annotated[
        RemovalPolicy | None, Prop(
            default=RemovalPolicy.DESTROY,
            default_doc="DESTROY",
            text="for the functions' log groups",
        )]
    enabled: Annotated[
        bool, Prop(
            default=True,
            default_doc="True",
            text="whether the consumer's event source polls; False stops sending without deleting anything (jobs wait "
            "in the queue)",
        )]
    dead_letter_queue: Annotated[
        sqs.IQueue | None, Prop(
            default=None,
            default_doc="one the construct makes",
            text="bring your own dead-letter queue: it must be of the job queue's kind (FIFO or not) and keep "
            "messages 14 days, as the `dedupe_ttl` rules assume (both checked at synth for a queue defined in the "
            "app)",
        )]
    outcome_events: Annotated[
        bool | None, Prop(
            default=Derived(derivations.outcome_events),
            default_doc="on (off with a warning for an `existing_table` without a stream)",
            text="publish each transition of a key (sent, delivered, bounced, complained, ..., cancelled) to "
            "EventBridge for the application, read from a stream on the dedupe table by a bundled publisher, with its "
            "failure queue and alarm (see `on_outcome` and the outcome events page); True with an `existing_table` "
            "that has no stream fails synth",
        )]
    outcome_bus: Annotated[
        events.IEventBus | None, Prop(
            default=None,
            default_doc="the default bus",
            text="the event bus (`events.IEventBus`) outcome events go to; needs `outcome_events`",
        )]
    suppression_reasons: Annotated[
        ses.SuppressionReasons | None, Prop(
            default=None,
            default_doc="the account's",
            text="the configuration set's own suppression list reasons (`ses.SuppressionReasons`: bounces, complaints "
            "or both), only for the configuration set the construct makes: not with `configuration_set` or "
            "`ses_events=False`",
        )]
    disable_suppression_list: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="send even to addresses on the account's suppression list (the configuration set ignores it); not "
            "with `suppression_reasons`",
        )]
    key_privacy: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="outside the job body, a key travels as `hmac-` + its HMAC-SHA256 under a secret the construct keeps "
            "in Secrets Manager (`key_secret`, retained, never rotated): the ledger, SES's tags and events, logs, "
            "metrics and the DLQ's attributes never carry its text; switching an existing pipeline forgets every key "
            "it recorded (see the personal data page, also for why it is off by default)",
        )]
    ses_tenants: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="send a job's `tenant` as SendEmail's `TenantName` (SES tenants keep each tenant's reputation and "
            "sending status apart); the grant covers the account's tenants; each tenant must exist in SES with the "
            "sender identity, the configuration set and the templates associated with it (`add_ses_tenant(name)`, or "
            "SES's `CreateTenant` and `CreateTenantResourceAssociation` when a customer signs up), else SES refuses "
            f"the send and the job goes to the DLQ with `{ReasonCode.SES_REFUSED.value}`",
        )]
    tenant_metrics: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="also write the consumer's metrics with a `Tenant` dimension (its digest with `key_privacy`) beside "
            "`Pipeline`; each tenant seen is a new set of custom metrics CloudWatch bills monthly (about 25 per "
            "tenant: a platform of 1,000 tenants pays for 25,000 metrics); the log lines carry `tenant` either way, "
            "for Logs Insights at no metric cost",
        )]
    allowed_recipients: Annotated[
        Sequence[str] | None, Prop(
            default=None,
            default_doc="none (every recipient)",
            text="for a non-production stage: the only addresses and domains (exactly those domains, not subdomains; "
            "`SES_MAILBOX_SIMULATOR` for SES's simulator) this pipeline may send to; a job naming any other recipient "
            f"goes to the DLQ with `{ReasonCode.RECIPIENT_NOT_ALLOWED.value}`, unsent; not empty, each entry a bare "
            "address or a domain",
        )]
    suspected_doubles: Annotated[
        OnSuspectedDouble | None, Prop(
            default=None,
            default_doc="off",
            text="the mis-keyed-producer guard: a job whose recipients (to, cc and bcc together) got the same content "
            "(sender, subject and bodies or template and data, attachments, tenant) under another key within "
            "`guard_window` is counted (`SuspectedDoubles`, alarmed) and published (`Email Suspected Double`), then "
            "sent (`OnSuspectedDouble.FLAG`) or dead-lettered unsent (`OnSuspectedDouble.HOLD`, reason "
            f"`{ReasonCode.SUSPECTED_DOUBLE.value}`; `sendonce dlq redrive` sends it); one more DynamoDB write per "
            "email, two for a suspect (see the costs page); recipients and content kept as digests only; it cannot "
            "see a copy whose content differs (a body that prints the time it was rendered)",
        )]
    recipient_cap: Annotated[
        int | None, Prop(
            default=None,
            default_doc="none",
            text="the most emails (distinct keys) one recipient may get from this pipeline in one `guard_window` "
            f"(windows as the epoch divides them), {MIN_RECIPIENT_CAP} to {MAX_RECIPIENT_CAP}, a runaway loop's "
            "brake: a job that would take any of its recipients over it is dead-lettered unsent with "
            f"`{ReasonCode.RECIPIENT_CAP.value}` (alarmed), counting nowhere, and `sendonce dlq redrive` sends it; "
            "one DynamoDB write per email (a transaction for several recipients)",
        )]
    guard_window: Annotated[
        Duration | None, Prop(
            default=Duration.hours(1),
            default_doc="1 hour",
            text="the window of `suspected_doubles` (from a content's first key) and of `recipient_cap`, "
            f"{MIN_GUARD_WINDOW_S} s to {MAX_GUARD_WINDOW_S // 3600} hours; only with one of them",
        )]
    waiting_room: Annotated[
        bool | None, Prop(
            default=Derived(derivations.waiting_room),
            default_doc="on for a standard queue; off for a FIFO queue",
            text="a DynamoDB table where a job whose `sendAt` is more than 15 minutes ahead, or a job parked while "
            "SES stops sending, waits, and a small function an EventBridge schedule runs every minute that sends each "
            "back to its lane's queue: a scheduled job shortly before its `sendAt`, a parked one once SES says it "
            "sends again (docs: when SES stops sending); a standard queue only (a FIFO queue refuses `sendAt`, and "
            "its parked jobs keep their group's order by waiting in their queue); about three requests a job for its "
            "whole wait, where delayed copies cost 4 to 12 SQS requests an hour (a week ahead: about 2,000), and a "
            "stop's backlog moves within a minute of SES sending again, not up to 15 minutes later; a job larger than "
            "the room's item (about 380 KB) waits as delayed copies; the function runs 43,800 times a month whether "
            "jobs wait or not (within Lambda's free tier at 128 MB), and reads the table and asks SES's GetAccount "
            "once a run",
        )]
    quota_watch: Annotated[
        bool, Prop(
            default=True,
            default_doc="True",
            text="a small bundled function an EventBridge schedule runs every five minutes, reading SES's 24-hour "
            "quota (SESv2 `GetAccount`, `SendQuota`) into the `QuotaUsedPercent` metric; a paced consumer reads only "
            "`MaxSendRate` from `GetAccount`, once a minute an instance (docs: sending rate)",
        )]
    quota_alarm_threshold: Annotated[
        float | None, Prop(
            default=DEFAULT_QUOTA_ALARM_PERCENT,
            default_doc="80",
            text="the share of SES's 24-hour quota used (percent) that raises the `QuotaNearlyUsed` alarm, with "
            "`quota_watch`",
        )]
    attachments_bucket: Annotated[
        bool | s3.IBucket | None, Prop(
            default=False,
            default_doc="False",
            text="where jobs' attachments too large to carry inline are kept (S3 claim checks); `True` makes a "
            "bucket: SSE-S3 (KMS with `encryption_key`), TLS only, public access blocked, no versioning, objects "
            "expiring after the longest a job can still be sent (see the attachments bucket page), retained like the "
            "queues (`queue_removal_policy`); an `s3.IBucket` brings your own: for a `Bucket` defined in the app, a "
            "lifecycle rule that expires or archives objects sooner, or public access not blocked, fails synth; the "
            "consumer reads attachments from this bucket only, and `grant_attach` lets a producer upload them",
        )]
    outbox: Annotated[
        bool, Prop(
            default=False,
            default_doc="False",
            text="add a transactional outbox (a table with a stream, relayed to the queue; see the outbox on the "
            "producing page) that producers write in their own DynamoDB transaction with "
            "`sendonce_producer.outbox_put`; its table's removal policy is `removal_policy`",
        )]


def declared_props() -> Mapping[str, Prop]:
    """Every prop's declaration, by name, in declaration order."""
    hints = get_type_hints(SendOnceEmailQueueProps, include_extras=True)
    declared: dict[str, Prop] = {}
    for name, hint in hints.items():
        [prop] = [meta for meta in getattr(_unrequired(hint), "__metadata__", ()) if isinstance(meta, Prop)]
        declared[name] = prop
    return declared


def prop_text(name: str) -> str:
    """The prop ``name``'s text as the docstring, the props reference and a missing prop's error show it: with the
    bounds of its row of the range table after it (``rules.RANGES``: the same row words the range's error)."""
    text = declared_props()[name].text
    for row in RANGES:
        if row.prop == name:
            text += f"; {row.what}{row.bounds()}{row.limit}"
    return text


def declared_types() -> Mapping[str, object]:
    """Every prop's declared type, by name (``Annotated`` and ``Required`` taken off)."""
    return get_type_hints(SendOnceEmailQueueProps)


def _unrequired(hint: object) -> object:
    # get_type_hints keeps Required[...] around the Annotated[...] it wraps.
    args = getattr(hint, "__args__", None)
    if getattr(hint, "__origin__", None) is Required and args:
        return args[0]
    return hint
