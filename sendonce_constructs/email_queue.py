"""SendOnceEmailQueue: SQS -> Lambda -> SES, where each email is sent once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from aws_cdk import Aspects, CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.deploy_config import PROP_FIELDS, ConsumerConfig, TimeBudget
from sendonce_contract.job_lifetime import DEAD_LETTER_RETENTION_S
from sendonce_contract.priority import Priority
from sendonce_contract.schema import LaneWorkItem, Metric
from sendonce_contract.schema import Ledger as LedgerSchema
from sendonce_contract.ses_tenant_settings import (
    InvalidTenantSetting,
    ReputationPolicy,
    TenantSuppression,
    reputation_policy,
)
from sendonce_contract.sqs_limits import SQS_DEFAULT_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES
from sendonce_contract.stack_names import ChildId, OutputId, OutputPart, output_description
from sendonce_contract.tenant import InvalidTenant, check_tenant

from . import ses_permissions
from .acknowledgements import acknowledge, wildcard_resource_finding
from .attachments import Attachments, build_attachments, objects_finding
from .bundled_function import BundledFunction, FunctionOptions
from .errors import ID_PREFIX, SendOnceConfigurationError
from .evidence import SesEvidence
from .key_secret import build_key_secret
from .lane_rates import lane_batch_size
from .monitoring import PipelineMetrics, build_alarms, build_dashboard
from .network import VpcEgressCheck
from .outbox import Outbox
from .outcome_events import OutcomeEvents
from .parts import Evidence, Lane, LaneConsumer, LedgerParts, Monitoring, Queues
from .props import PipelineProps, known, resolve_props, seconds
from .queue_props import SendOnceEmailQueueProps
from .quota_watch import build_quota_watch
from .runtime_asset import HANDLER
from .synth_warnings import warn
from .unresolved import is_known
from .waiting_room import SesStopsWatched, WaitingRoom

DLQ_RETENTION = Duration.seconds(DEAD_LETTER_RETENTION_S)  # the TTL rules count on this figure
# Why each lane's own DLQ has no queue behind it (cdk-nag's finding), by whether it is the urgent lane's.
DEAD_LETTER_QUEUE_REASON = {
    False: "This is the dead-letter queue: a queue behind it would hide failed jobs instead of keeping them.",
    True: "This is the urgent lane's dead-letter queue: a queue behind it would hide failed jobs.",
}
# The consumer's DynamoDB calls, and nothing more: the claim, the completion and the release.
DEDUPE_TABLE_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")


class SendOnceEmailQueue(Construct, PipelineMetrics):
    """An SQS queue whose jobs are sent as SES emails once each, by a bundled deduplicating Lambda consumer.

    Producers enqueue JSON jobs (see the message contract in the docs) to ``queue``; the consumer claims each
    job's ``dedupeKey`` in ``table`` with a conditional write, sends with SES, and records the outcome.
    Every default follows the AWS guidance for SQS-triggered Lambdas; a prop that would break a guarantee
    raises :class:`SendOnceConfigurationError` at synth time, with the rule's stable ``id`` and the construct's
    ``path``, as does an unknown keyword. The keywords are :class:`SendOnceEmailQueueProps`; the list below is
    rendered from their declarations (``make props-docs``).

    :param sender: the SES identity to send from: a domain (``"example.com"``), a bare address, or an
        ``aws_ses.IEmailIdentity``; the IAM grant names this identity's ARN only. Required.
    :param from_addresses: the From addresses allowed (``ses:FromAddress`` condition): bare addresses of the sender
        identity. Default: any address of the domain identity, or the address identity itself.
    :param configuration_set: an SES configuration set used for every send (name or ``IConfigurationSet``), granted
        and passed to the consumer; with ``ses_events`` the construct adds its EventBridge event destination to it.
        Default: one the construct makes.
    :param ses_events: make SES's own events the evidence of each send: a configuration set with an event
        destination to the default event bus, a rule matching this pipeline's ``sendonce-pipeline`` tag, a queue and
        DLQ, and the bundled recorder. Default: True.
    :param evidence_grace_period: how long after a dead worker's lease expired its send waits for SES's events
        before the delivery policy decides it, 10 s to 12 h; with ``ses_events`` the retention period must cover 2 x
        ``visibility_timeout`` + this, and ``max_receive_count`` must be at least 3. Default: 5 minutes.
    :param template_names: SES templates the jobs may use, each name by SES's rule (1-64 letters, digits, ``_``,
        ``-``); each template's ARN is added to the grant. Default: none.
    :param allow_raw_messages: grant ``ses:SendRawEmail``, which jobs with ``raw`` MIME content need. Default:
        False.
    :param function_timeout: the consumer's timeout; it also sizes the consumer's SES timeouts, lease margin and
        ledger call timeouts (no SDK retries; every call a record makes fits before the deadline guard, at the
        shortest timeout too); between 1 s and 900 s, Lambda's limit. Default: 30 s.
    :param memory_size: the consumer's memory in MB; between 128 and 10240 MB, Lambda's limits. Default: 256 MB.
    :param architecture: the instruction set of every bundled function. Default: ARM64.
    :param runtime: the Python runtime of every bundled function. Default: newest Python runtime aws-cdk-lib knows.
    :param precompiled_bytecode: ship the bundled functions' bytecode, compiled at synth, so that a cold start loads
        it instead of compiling every module (Lambda's asset folder is read-only; see the costs page and
        BENCHMARKS.md, section 3); the asset is about three times larger; ``runtime`` must pin the Python running
        synth (``PYTHON_3_11`` under Python 3.11) on every machine that synthesizes the app, or synth fails.
        Default: False.
    :param log_retention: how long the consumer's logs are kept, in the function's own log group. Default: one
        month.
    :param tracing: X-Ray tracing for the consumer: ``lambda_.Tracing.ACTIVE`` turns it on. Default: off.
    :param visibility_timeout: the job queue's visibility timeout, at most 12 h; smaller than the default fails
        synth. Default: 6 x ``function_timeout`` + ``max_batching_window``.
    :param max_batching_window: how long the event source gathers a batch, 0 to 300 s; not with ``fifo``. Default:
        none.
    :param max_concurrency: cap on concurrent consumer invocations, e.g. to stay under SES's rate; with
        ``send_rate`` it must be known at synth, and the event source runs at most floor(rate) instances, so each
        paces at one email a second or more (two at least; docs: sending rate): a cap above that warns at synth;
        between 2 and 1000, the SQS event source's limit. Default: none.
    :param send_rate: the rate to give: recipients per second this pipeline may send, all its instances together
        (SES's quotas count recipients: to + cc + bcc), above 0; its share of the account's SES maximum send rate
        (SES's own ``MaxSendRate`` scales it down when lower: docs: sending rate); each instance is paced at
        ``send_rate`` / ``max_concurrency`` (over the instances that run, where fewer), so it needs
        ``max_concurrency`` known at synth, and at most 200 a second an instance; with ``urgent_lane``,
        ``urgent_share`` of it is the urgent lane's (docs: the urgent lane); not with ``max_send_rate``. Default:
        none.
    :param max_send_rate: Deprecated: give ``send_rate`` (with ``max_concurrency``) instead; recipients per second
        per consumer instance: a token bucket of a second's worth (one token at least) before each send takes one
        token per recipient (as SES's quotas count them), so parallel sends stay under the account's SES rate; the
        pipeline's peak is this times the instances that run, with no bound without ``max_concurrency``; a job with
        more recipients than the bucket holds waits for a full bucket and goes; not with ``send_rate`` or
        ``urgent_lane``; above 0 recipients per second. Default: none.
    :param batch_size: records per invocation, 1 to 10 (FIFO) or 10000; above 10 needs a ``max_batching_window``.
        Default: 10; with a send rate, what one instance sends in a second (at least 1).
    :param parallelism: records of one batch handled at once by one invocation (threads sharing one client per
        service), at most ``batch_size``; 1 turns it off. Default: the batch size, at most 10.
    :param urgent_lane: a second job queue (``urgent_queue``, with its own DLQ) and consumer of the same kind (FIFO,
        encryption, retention) for jobs with ``"priority": "urgent"``, so they never wait behind bulk mail, with one
        dedupe ledger for both; the producer, the outboxes and ``sendonce dlq redrive`` route a job by its
        ``priority``, and a job on the other lane's queue is still sent; with ``send_rate`` the lane keeps
        ``urgent_share`` of the rate, lent to bulk while it is idle; not with ``max_send_rate`` (give
        ``send_rate``). Default: False.
    :param urgent_share: the urgent lane's share of ``send_rate``, above 0 and below 1: bulk never takes it, and
        borrows it while the urgent lane is idle (it took no job for 5 s); only with ``urgent_lane`` and
        ``send_rate``. Default: 0.2.
    :param max_job_age: the (bulk) lane's age limit, 60 s to 14 days: a job with no ``expiresAt`` (its own wins) is
        not sent once this long has passed since its first message was queued (a backlog, an SES stop, a throttle, a
        redrive; its delayed copies and dead letters carry that time, and a redrive keeps it); it is acknowledged
        unsent and its key recorded ``EXPIRED`` in one conditional write (``Expired`` metric, ``Email Expired``
        event), as a job past its own ``expiresAt`` is. Default: none (only a job's own ``expiresAt``).
    :param urgent_max_job_age: the urgent lane's age limit, 60 s to 14 days, as ``max_job_age`` (one-time codes and
        reset links: minutes); only with ``urgent_lane``. Default: none (only a job's own ``expiresAt``).
    :param max_delivery_duration: how long SES keeps trying to deliver the (bulk) lane's emails once it accepted
        them, 5 minutes to 14 hours (the configuration set's ``MaxDeliverySeconds``): past it SES gives up and
        publishes a bounce, so a receiving server that is down for hours does not take the email hours late; set on
        the configuration set the construct makes (not with ``configuration_set`` or ``ses_events=False``). Default:
        SES's, 14 hours.
    :param urgent_max_delivery_duration: the urgent lane's, as ``max_delivery_duration`` (5 minutes to 14 hours, on
        a configuration set the construct makes), so one-time codes give up in minutes while receipts keep trying
        for hours; only with ``urgent_lane``; the urgent lane sends through a configuration set of its own beside
        the one the construct makes (publishing SES's events as the other does; SES charges nothing for a set), and
        with the user's own ``configuration_set`` both lanes send through that. Default: as the bulk lane's.
    :param provisioned_pollers: the (bulk) lane's event source in provisioned mode, an
        ``aws_lambda.ProvisionedPollerConfig``: ``minimum_pollers`` (2 to 200) always ready, scaling to
        ``maximum_pollers`` (2 to 2000, at least the minimum), for a lower, steadier latency when a burst arrives
        after a quiet spell; it costs money while idle: AWS bills each poller provisioned (at least
        ``minimum_pollers``) every hour, as event poller units on Lambda's pricing page, whether jobs arrive or not;
        not with ``max_concurrency`` (so not with ``send_rate``): Lambda takes one or the other. Default: none
        (Lambda scales the event source's pollers with the backlog).
    :param urgent_provisioned_pollers: the urgent lane's event source in provisioned mode, as
        ``provisioned_pollers``: a latency floor for one-time codes and reset links after a quiet spell, billed
        every hour as ``provisioned_pollers`` is; only with ``urgent_lane``. Default: none (Lambda scales the event
        source's pollers with the backlog).
    :param max_receive_count: deliveries before a message moves to the DLQ: a job failing on its last allowed
        receive is dead-lettered by the consumer with its reason (``max-receives``) rather than moved by SQS with
        none; below 1 fails (below 3 with ``ses_events``: a dead worker's job is received once to wait for SES's
        events and once to be decided); below 5 warns (acknowledgeable: see the errors and warnings reference).
        Default: 5.
    :param retention_period: how long the job queue keeps a message; the DLQ keeps 14 days; between 60 s and 1209600
        s (14 days), SQS's limits. Default: 4 days.
    :param max_message_size_bytes: the largest message the queue takes, 1024 to 1048576 bytes (SQS's 1 MiB); a job
        may be that less the room a delayed copy's attributes take (about 1.6 KB; the producer's ``JobTooLarge``
        says so), and larger files go through ``attachments_bucket``; its dead-letter queue then takes SQS's
        largest, so any job can be dead-lettered with its reason; ``batch_size`` x (this + 1024 bytes of each
        record's envelope) must fit Lambda's 6 MB invocation payload (6291456 bytes). Default: 256 KiB, set in the
        template (SQS's own default is 1 MiB since 2025).
    :param dedupe_ttl: how long a sent key is remembered; at least ``retention_period``: a key forgotten while its
        message can still arrive is sent twice. Default: 7 days; with ``outbox``, 1 day of stream retention +
        ``retention_period`` + the DLQ's 14 days, in whole days (19 days with the default ``retention_period``).
    :param delivery: what happens to a send a crash left undecided and SES's events did not settle; ``NEVER_RESEND``
        never risks a double (see the guarantees page). Default: ``DeliveryPolicy.RESEND_WITHOUT_EVIDENCE``.
    :param fifo: use a FIFO job queue and DLQ, order kept per message group. Default: False.
    :param existing_table: bring your own dedupe table instead (partition key ``dedupeKey``, string, no sort key:
        checked at synth for a ``Table`` or ``TableV2`` defined in the app); its own KMS key, if any, is granted to
        the consumer; not with the table props below. Default: a new table.
    :param removal_policy: for the dedupe table the construct makes. Default: RETAIN.
    :param deletion_protection: for the dedupe table the construct makes. Default: False.
    :param encryption: queue encryption; ``UNENCRYPTED`` is refused. Default: SQS-managed (KMS when
        ``encryption_key`` is given).
    :param encryption_key: a customer-managed KMS key for both queues and the dedupe table, granted to the consumer.
        Default: none.
    :param alarms: create the default alarms (DLQ not empty, oldest message too old, UNKNOWN records, function
        errors). Default: True.
    :param alarm_topic: an ``sns.ITopic`` every alarm notifies. Default: none.
    :param oldest_message_alarm_threshold: the age of the oldest job that raises an alarm. Default: 15 minutes.
    :param urgent_oldest_message_alarm_threshold: the age of the oldest urgent job that raises the
        ``UrgentOldestMessageTooOld`` alarm, at most ``oldest_message_alarm_threshold``; only with ``urgent_lane``.
        Default: 1 minute.
    :param dashboard: draw the pipeline on a CloudWatch dashboard (``.dashboard``). Default: False.
    :param vpc: put every bundled function (consumer, relay, recorder) in this VPC, with the subnets and security
        groups below; they need routes or VPC endpoints to DynamoDB, SQS, SES and CloudWatch Logs: selected subnets
        with no egress (isolated, or public: a function gets no public address) in a VPC with no endpoint warn
        (acknowledgeable: see the errors and warnings reference). Default: none.
    :param vpc_subnets: the subnets of every bundled function; needs ``vpc``; selected subnets with no egress in a
        VPC with no endpoint warn. Default: CDK's choice (private subnets).
    :param security_groups: the security groups of every bundled function; needs ``vpc``. Default: one per function,
        outbound only.
    :param reserved_concurrent_executions: the consumer's reserved concurrency; at least 1 and at least
        ``max_concurrency``. Default: none.
    :param log_level: the application log level (``lambda_.ApplicationLogLevel``) of every bundled function.
        Default: INFO.
    :param queue_removal_policy: for the queues the construct makes: RETAIN keeps, when the stack is deleted, jobs
        not yet sent. Default: RETAIN.
    :param log_removal_policy: for the functions' log groups. Default: DESTROY.
    :param enabled: whether the consumer's event source polls; False stops sending without deleting anything (jobs
        wait in the queue). Default: True.
    :param dead_letter_queue: bring your own dead-letter queue: it must be of the job queue's kind (FIFO or not) and
        keep messages 14 days, as the ``dedupe_ttl`` rules assume (both checked at synth for a queue defined in the
        app). Default: one the construct makes.
    :param outcome_events: publish each transition of a key (sent, delivered, bounced, complained, ..., cancelled)
        to EventBridge for the application, read from a stream on the dedupe table by a bundled publisher, with its
        failure queue and alarm (see ``on_outcome`` and the outcome events page); True with an ``existing_table``
        that has no stream fails synth. Default: on (off with a warning for an ``existing_table`` without a stream).
    :param outcome_bus: the event bus (``events.IEventBus``) outcome events go to; needs ``outcome_events``.
        Default: the default bus.
    :param suppression_reasons: the configuration set's own suppression list reasons (``ses.SuppressionReasons``:
        bounces, complaints or both), only for the configuration set the construct makes: not with
        ``configuration_set`` or ``ses_events=False``. Default: the account's.
    :param disable_suppression_list: send even to addresses on the account's suppression list (the configuration set
        ignores it); not with ``suppression_reasons``. Default: False.
    :param key_privacy: outside the job body, a key travels as ``hmac-`` + its HMAC-SHA256 under a secret the
        construct keeps in Secrets Manager (``key_secret``, retained, never rotated): the ledger, SES's tags and
        events, logs, metrics and the DLQ's attributes never carry its text; switching an existing pipeline forgets
        every key it recorded (see the personal data page, also for why it is off by default). Default: False.
    :param ses_tenants: send a job's ``tenant`` as SendEmail's ``TenantName`` (SES tenants keep each tenant's
        reputation and sending status apart); the grant covers the account's tenants; each tenant must exist in SES
        with the sender identity, the configuration set and the templates associated with it
        (``add_ses_tenant(name)``, or SES's ``CreateTenant`` and ``CreateTenantResourceAssociation`` when a customer
        signs up), else SES refuses the send and the job goes to the DLQ with ``ses-refused``. Default: False.
    :param tenant_metrics: also write the consumer's metrics with a ``Tenant`` dimension (its digest with
        ``key_privacy``) beside ``Pipeline``; each tenant seen is a new set of custom metrics CloudWatch bills
        monthly (about 25 per tenant: a platform of 1,000 tenants pays for 25,000 metrics); the log lines carry
        ``tenant`` either way, for Logs Insights at no metric cost. Default: False.
    :param allowed_recipients: for a non-production stage: the only addresses and domains (exactly those domains,
        not subdomains; ``SES_MAILBOX_SIMULATOR`` for SES's simulator) this pipeline may send to; a job naming any
        other recipient goes to the DLQ with ``recipient-not-allowed``, unsent; not empty, each entry a bare address
        or a domain. Default: none (every recipient).
    :param suspected_doubles: the mis-keyed-producer guard: a job whose recipients (to, cc and bcc together) got the
        same content (sender, subject and bodies or template and data, attachments, tenant) under another key within
        ``guard_window`` is counted (``SuspectedDoubles``, alarmed) and published (``Email Suspected Double``), then
        sent (``OnSuspectedDouble.FLAG``) or dead-lettered unsent (``OnSuspectedDouble.HOLD``, reason
        ``suspected-double``; ``sendonce dlq redrive`` sends it); one more DynamoDB write per email, two for a
        suspect (see the costs page); recipients and content kept as digests only; it cannot see a copy whose
        content differs (a body that prints the time it was rendered). Default: off.
    :param recipient_cap: the most emails (distinct keys) one recipient may get from this pipeline in one
        ``guard_window`` (windows as the epoch divides them), 1 to 1000, a runaway loop's brake: a job that would
        take any of its recipients over it is dead-lettered unsent with ``recipient-cap`` (alarmed), counting
        nowhere, and ``sendonce dlq redrive`` sends it; one DynamoDB write per email (a transaction for several
        recipients). Default: none.
    :param guard_window: the window of ``suspected_doubles`` (from a content's first key) and of ``recipient_cap``,
        60 s to 24 hours; only with one of them. Default: 1 hour.
    :param waiting_room: a DynamoDB table where a job whose ``sendAt`` is more than 15 minutes ahead, or a job
        parked while SES stops sending, waits, and a small function an EventBridge schedule runs every minute that
        sends each back to its lane's queue: a scheduled job shortly before its ``sendAt``, a parked one once SES
        says it sends again (docs: when SES stops sending); a standard queue only (a FIFO queue refuses ``sendAt``,
        and its parked jobs keep their group's order by waiting in their queue); about three requests a job for its
        whole wait, where delayed copies cost 4 to 12 SQS requests an hour (a week ahead: about 2,000), and a stop's
        backlog moves within a minute of SES sending again, not up to 15 minutes later; a job larger than the room's
        item (about 380 KB) waits as delayed copies; the function runs 43,800 times a month whether jobs wait or not
        (within Lambda's free tier at 128 MB), and reads the table and asks SES's GetAccount once a run. Default: on
        for a standard queue; off for a FIFO queue.
    :param quota_watch: a small bundled function an EventBridge schedule runs every five minutes, reading SES's
        24-hour quota (SESv2 ``GetAccount``, ``SendQuota``) into the ``QuotaUsedPercent`` metric; a paced consumer
        reads only ``MaxSendRate`` from ``GetAccount``, once a minute an instance (docs: sending rate). Default:
        True.
    :param quota_alarm_threshold: the share of SES's 24-hour quota used (percent) that raises the
        ``QuotaNearlyUsed`` alarm, with ``quota_watch``; a percentage of SES's 24-hour quota above 0 and at most
        100. Default: 80.
    :param attachments_bucket: where jobs' attachments too large to carry inline are kept (S3 claim checks);
        ``True`` makes a bucket: SSE-S3 (KMS with ``encryption_key``), TLS only, public access blocked, no
        versioning, objects expiring after the longest a job can still be sent (see the attachments bucket page),
        retained like the queues (``queue_removal_policy``); an ``s3.IBucket`` brings your own: for a ``Bucket``
        defined in the app, a lifecycle rule that expires or archives objects sooner, or public access not blocked,
        fails synth; the consumer reads attachments from this bucket only, and ``grant_attach`` lets a producer
        upload them. Default: False.
    :param outbox: add a transactional outbox (a table with a stream, relayed to the queue; see the outbox on the
        producing page) that producers write in their own DynamoDB transaction with
        ``sendonce_producer.outbox_put``; its table's removal policy is ``removal_policy``. Default: False.
    """

    def __init__(self, scope: Construct, id: str, **props: Unpack[SendOnceEmailQueueProps]) -> None:
        super().__init__(scope, id)
        resolved = resolve_props(props, self.node.path)
        warn(self, resolved)
        self.delivery = resolved.delivery
        self._ses_tenants = resolved.ses_tenants
        self._tenant_resources: tuple[str, ...] = ()  # every lane's SES resources, added as each is granted
        self.fifo = resolved.fifo
        self.encryption_key = resolved.encryption_key
        self.pipeline_name = self.node.path
        queues = self._build_queues(resolved)
        self.queue, self.dead_letter_queue = queues.queue, queues.dead_letter_queue
        urgent_queues = self._build_queues(resolved, urgent=True) if resolved.urgent_lane else None
        self.urgent_queue = urgent_queues.queue if urgent_queues is not None else None
        self.urgent_dead_letter_queue = urgent_queues.dead_letter_queue if urgent_queues is not None else None
        bulk, urgent = self._lanes(resolved, queues, urgent_queues)
        ledger = self._build_ledger(resolved)
        self.table, self.key_secret, self._ledger = ledger.table, ledger.key_secret, ledger
        if resolved.vpc is not None:
            Aspects.of(self).add(VpcEgressCheck(self, resolved.vpc, resolved.vpc_subnets))
        expiry_days = resolved.attachments_expiry_days
        self._attachments = build_attachments(
            self, resolved.attachments_bucket, expiry_days if isinstance(expiry_days, int) else None,
            resolved.encryption_key, resolved.queue_removal_policy)
        self.attachments_bucket: s3.IBucket | None = self._attachments.bucket if self._attachments else None
        self.attachments_expiry: Duration | None = self._attachments.expiry if self._attachments else None
        function_options = self._function_options(resolved, ledger)
        evidence = self._build_evidence(resolved, ledger, function_options)
        self.waiting_room = None if not resolved.waiting_room else WaitingRoom(
            self, self.pipeline_name, queue=queues.queue, dead_letter_queue=queues.dead_letter_queue,
            urgent_queue=urgent_queues.queue if urgent_queues is not None else None,
            urgent_dead_letter_queue=urgent_queues.dead_letter_queue if urgent_queues is not None else None,
            options=function_options,
            encryption_key=resolved.encryption_key, removal_policy=resolved.removal_policy,
            deletion_protection=resolved.deletion_protection,
            stops=SesStopsWatched(ledger.table, *self._sender_identity(resolved), evidence.configuration_set_name,
                                  resolved.ses_tenants))
        self.evidence, self.outcome_events = evidence.ses, evidence.outcome_events
        consumer = self._build_consumer(resolved, bulk, ledger, evidence, self._attachments, function_options)
        self.function, self.role, self.log_group = consumer.function, consumer.role, consumer.log_group
        self.event_source = consumer.event_source
        self.urgent_consumer = (
            self._build_consumer(resolved, urgent, ledger, evidence, self._attachments, function_options)
            if urgent is not None else None)
        self.urgent_function = self.urgent_consumer.function if self.urgent_consumer is not None else None
        self.outbox = self._build_outbox(resolved, queues, urgent_queues, function_options, ledger)
        self._build_outputs(resolved, queues, urgent_queues, ledger, self.outbox, self._attachments)
        monitoring = self._build_monitoring(resolved, evidence, function_options)
        self.quota_watch, self.alarms, self.dashboard = monitoring.quota_watch, monitoring.alarms, monitoring.dashboard

    def _build_queues(self, props: PipelineProps, urgent: bool = False) -> Queues:
        """A lane's job queue and its DLQ, of one kind for both lanes (FIFO-ness, encryption, retention, visibility,
        receives), so a job behaves the same on either; only the bulk lane's DLQ may be one the app gives."""
        given = None if urgent else props.dead_letter_queue
        dead_letter_queue: sqs.IQueue = given or sqs.Queue(
            self,
            ChildId.URGENT_DEAD_LETTER_QUEUE if urgent else ChildId.DEAD_LETTER_QUEUE,
            fifo=props.fifo or None,
            retention_period=DLQ_RETENTION,
            # Any job the queue takes can be dead-lettered with its reason attributes on top.
            max_message_size_bytes=SQS_MAX_MESSAGE_BYTES if props.max_message_size_bytes is not None else None,
            encryption=props.encryption,
            encryption_master_key=props.encryption_key,
            enforce_ssl=True,
            removal_policy=props.queue_removal_policy,
        )
        if given is None:
            acknowledge(dead_letter_queue, "Serverless-SQSRedrivePolicy", DEAD_LETTER_QUEUE_REASON[urgent])
        queue = sqs.Queue(
            self,
            ChildId.URGENT_QUEUE if urgent else ChildId.QUEUE,
            fifo=props.fifo or None,
            visibility_timeout=props.visibility_timeout,
            retention_period=props.retention_period,
            max_message_size_bytes=_job_message_size(props),
            encryption=props.encryption,
            encryption_master_key=props.encryption_key,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=props.max_receive_count),
            removal_policy=props.queue_removal_policy,
        )
        return Queues(queue=queue, dead_letter_queue=dead_letter_queue)

    @staticmethod
    def _lanes(props: PipelineProps, queues: Queues, urgent_queues: Queues | None) -> tuple[Lane, Lane | None]:
        """The bulk lane (the job queue, as without lanes) and, with urgent_lane, the urgent one, each with its
        pace (``lane_rates``)."""
        rates = props.lane_rates
        if urgent_queues is None or rates is None:
            return Lane(name="", queues=queues, max_concurrency=props.paced_concurrency,
                        max_send_rate=props.max_send_rate, provisioned_pollers=props.provisioned_pollers), None
        lending = rates.lent_instance_rate is not None
        bulk = Lane(name=Priority.BULK.value, queues=queues, max_concurrency=rates.bulk_max_concurrency,
                    max_send_rate=rates.bulk_instance_rate if lending else props.max_send_rate,
                    lent_send_rate=rates.lent_instance_rate,
                    provisioned_pollers=props.provisioned_pollers)
        urgent = Lane(name=Priority.URGENT.value, queues=urgent_queues, max_concurrency=rates.urgent_max_concurrency,
                      max_send_rate=rates.urgent_instance_rate,
                      batch_size=lane_batch_size(props.batch_size, props.function_timeout, rates.urgent_instance_rate),
                      provisioned_pollers=props.urgent_provisioned_pollers)
        return bulk, urgent

    def _build_ledger(self, props: PipelineProps) -> LedgerParts:
        table: dynamodb.ITable = props.existing_table or dynamodb.Table(
            self,
            ChildId.DEDUPE_TABLE,
            partition_key=dynamodb.Attribute(name=LedgerSchema.KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=LedgerSchema.EXPIRES_AT,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=props.removal_policy,
            deletion_protection=props.deletion_protection,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED if props.encryption_key else None,
            encryption_key=props.encryption_key,
            # Outcome events are read from it: each write's before and after images.
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if props.outcome_events else None,
        )
        # The queues' and table's key, and an existing table's own key: without it every claim is AccessDenied.
        data_keys = [props.encryption_key] if props.encryption_key is not None else []
        table_key = table.encryption_key
        if table_key is not None and table_key is not props.encryption_key:
            data_keys.append(table_key)
        key_secret = build_key_secret(self, props.encryption_key) if props.key_privacy else None
        return LedgerParts(table=table, data_keys=data_keys, key_secret=key_secret)

    def _function_options(self, props: PipelineProps, ledger: LedgerParts) -> FunctionOptions:
        return FunctionOptions(
            runtime=props.runtime, architecture=props.architecture, log_retention=props.log_retention,
            tracing=props.tracing, data_keys=list(ledger.data_keys), log_level=props.log_level,
            log_removal_policy=props.log_removal_policy, vpc=props.vpc, vpc_subnets=props.vpc_subnets,
            security_groups=props.security_groups, precompiled_bytecode=props.precompiled_bytecode,
        )

    def _build_evidence(self, props: PipelineProps, ledger: LedgerParts, function_options: FunctionOptions) -> Evidence:
        ses_evidence = SesEvidence(
            self, "SesEvidence", table=ledger.table, configuration_set=props.configuration_set,
            suppression_reasons=props.suppression_reasons, disable_suppression_list=props.disable_suppression_list,
            pipeline_tag=self.node.addr, pipeline_name=self.pipeline_name, function_options=function_options,
            queue_encryption=props.encryption, encryption_key=props.encryption_key,
            max_delivery_duration=props.max_delivery_duration,
            urgent_max_delivery_duration=props.urgent_max_delivery_duration if props.urgent_lane else None,
            urgent_lane=props.urgent_lane,
        ) if props.ses_events else None
        outcome_events = OutcomeEvents(
            self, "OutcomeEvents", table=ledger.table, bus=props.outcome_bus, pipeline_tag=self.node.addr,
            pipeline_name=self.pipeline_name, function_options=function_options, encryption_key=props.encryption_key,
        ) if props.outcome_events else None
        configuration_set = ses_evidence.configuration_set if ses_evidence else props.configuration_set
        configuration_set_name = (
            configuration_set
            if configuration_set is None or isinstance(configuration_set, str)
            else configuration_set.configuration_set_name
        )
        urgent_set = ses_evidence.urgent_configuration_set if ses_evidence else None
        return Evidence(ses=ses_evidence, outcome_events=outcome_events, configuration_set_name=configuration_set_name,
                        urgent_configuration_set_name=urgent_set.configuration_set_name if urgent_set else None)

    def _build_consumer(self, props: PipelineProps, lane: Lane, ledger: LedgerParts, evidence: Evidence,
                        attachments: Attachments | None, function_options: FunctionOptions) -> LaneConsumer:
        """A lane's consumer: the job queue's (``Consumer``, as without lanes) or the urgent lane's
        (``UrgentConsumer``): the same code and grants, its own queue, DLQ, concurrency, pace and batch size."""
        urgent = lane.name == Priority.URGENT.value
        reserved = props.reserved_concurrent_executions
        if urgent and reserved is not None:  # its own reservation: bulk's never takes the urgent lane's instances
            reserved = lane.max_concurrency
        consumer = BundledFunction(
            self, ChildId.URGENT_CONSUMER if urgent else "Consumer", handler=HANDLER, timeout=props.function_timeout,
            memory_size=props.memory_size,
            environment=self._consumer_environment(props, lane, ledger, evidence, attachments),
            options=function_options, invoked_by="its SQS event source", reserved_concurrent_executions=reserved,
            description="sendonce consumer: sends each queued urgent email once" if urgent
            else "sendonce consumer: sends each queued email once",
            role_description="sendonce consumer: its dedupe table, its DLQ, SES on its identity, its log group",
        )
        function = consumer.function
        event_source = event_sources.SqsEventSource(
            lane.queues.queue,
            batch_size=lane.batch_size if lane.batch_size is not None else props.batch_size,
            max_batching_window=props.max_batching_window,
            max_concurrency=lane.max_concurrency,
            provisioned_poller_config=lane.provisioned_pollers,
            report_batch_item_failures=True,
            enabled=props.enabled,
        )
        function.add_event_source(event_source)
        if not urgent:
            acknowledge(self, "Serverless-LambdaEventSourceMappingDestination",
                        "SQS event sources take no on-failure destination; failed jobs go to the queue's redrive "
                        "DLQ.")
        ledger.table.grant(function, *DEDUPE_TABLE_ACTIONS)
        lane.queues.dead_letter_queue.grant_send_messages(function)
        lane.queues.queue.grant_send_messages(function)  # a throttled job's delayed copy
        if lane.lent_send_rate is not None:  # the urgent lane's work item, and no other: its share is lent while idle
            function.add_to_role_policy(iam.PolicyStatement(
                actions=["dynamodb:GetItem"], resources=[ledger.table.table_arn],
                conditions={"ForAllValues:StringEquals": {
                    "dynamodb:LeadingKeys": [LaneWorkItem.key(self.pipeline_name)]}}))
        if self.waiting_room is not None:
            self.waiting_room.grant_admit(function)
        if evidence.outcome_events is not None:
            evidence.outcome_events.bus.grant_put_events_to(function)  # Email Dead-Lettered
        if ledger.key_secret is not None:
            ledger.key_secret.grant_read(function)
        if attachments is not None:
            self._grant_attachments_read(attachments, consumer.role, ledger)
        self._grant_ses(props, function, evidence.configuration_set_of(urgent))
        return LaneConsumer(function=function, role=consumer.role, log_group=consumer.log_group,
                        event_source=event_source)

    def _build_outbox(self, props: PipelineProps, queues: Queues, urgent_queues: Queues | None,
                      function_options: FunctionOptions, ledger: LedgerParts) -> Outbox | None:
        if not props.outbox:
            return None
        return Outbox(self, "Outbox", queue=queues.queue, fifo=props.fifo, function_options=function_options,
                      encryption_key=props.encryption_key, removal_policy=props.removal_policy,
                      urgent_queue=urgent_queues.queue if urgent_queues is not None else None,
                      key_secret=ledger.key_secret)

    def _build_monitoring(self, props: PipelineProps, evidence: Evidence,
                          function_options: FunctionOptions) -> Monitoring:
        # The alarms and the dashboard read the pipeline's metrics: the parts above, already on the construct.
        quota_watch = build_quota_watch(self, self.pipeline_name, function_options) if props.quota_watch else None
        alarms: dict[str, cloudwatch.Alarm] = (
            build_alarms(self, self, props.oldest_message_alarm_threshold, props.alarm_topic,
                         props.quota_alarm_threshold if props.quota_watch else None,
                         props.urgent_oldest_message_alarm_threshold,
                         suspected_doubles=props.suspected_doubles is not None,
                         recipient_cap=props.recipient_cap is not None) if props.alarms else {}
        )
        if props.alarms and evidence.outcome_events is not None:
            alarms["OutcomeEventFailures"] = evidence.outcome_events.failures_alarm(props.alarm_topic)
        if props.alarms and self.waiting_room is not None:
            alarms.update(self.waiting_room.alarms(props.alarm_topic, self.metric(
                Metric.SCHEDULED_LEFT, statistic="Maximum", period=Duration.minutes(5))))
        dashboard = build_dashboard(self, self, alarms) if props.dashboard else None
        return Monitoring(quota_watch=quota_watch, alarms=alarms, dashboard=dashboard)

    def on_outcome(self, id: str, target: events.IRuleTarget | None = None,
                   outcomes: Sequence[str] | None = None) -> events.Rule:
        """A rule matching this pipeline's outcome events, like ``bucket.on_cloud_trail_event``: ``outcomes`` names
        the transitions wanted (``"bounced"``, ``"complained"``, ...; all when None); ``target`` receives them."""
        if self.outcome_events is None:
            raise SendOnceConfigurationError("on_outcome needs outcome_events=True on the SendOnceEmailQueue",
                                             f"{ID_PREFIX}NeedsOutcomeEvents", self.node.path)
        return self.outcome_events.rule(self, id, [target] if target else [], outcomes)

    def _grant_attachments_read(self, attachments: Attachments, role: iam.IRole, ledger: LedgerParts) -> None:
        # The consumer decrypts with the pipeline's own key already (a data key); a bucket's other key is granted.
        attachments.grant_read(role, with_key=attachments.key not in ledger.data_keys)
        acknowledge(role, objects_finding(attachments.bucket),
                    "GetObject on the attachments bucket's objects: a job names its attachment's key, which is "
                    "known only when the job arrives.")

    def _build_outputs(self, props: PipelineProps, queues: Queues, urgent_queues: Queues | None, ledger: LedgerParts,
                       outbox: Outbox | None, attachments: Attachments | None) -> None:
        # What `sendonce --stack NAME` reads to find this pipeline; the description says which pipeline and part.
        for output_id, value, part in ((OutputId.DEDUPE_TABLE_NAME, ledger.table.table_name, OutputPart.TABLE),
                                       (OutputId.QUEUE_URL, queues.queue.queue_url, OutputPart.QUEUE),
                                       (OutputId.DEAD_LETTER_QUEUE_URL, queues.dead_letter_queue.queue_url,
                                        OutputPart.DLQ)):
            CfnOutput(self, output_id, value=value, description=output_description(self.pipeline_name, part))
        # What `sendonce dlq redrive` reads to skip jobs whose key is forgotten, and `sendonce status` to digest a key.
        dedupe_ttl_s = seconds(props.dedupe_ttl)
        if dedupe_ttl_s is not None:
            CfnOutput(self, OutputId.DEDUPE_TTL_SECONDS, value=str(int(dedupe_ttl_s)),
                      description=output_description(self.pipeline_name, OutputPart.DEDUPE_TTL))
        # What `sendonce latency` weighs its measured event delays against.
        grace_s = seconds(props.evidence_grace_period)
        if grace_s is not None:
            CfnOutput(self, OutputId.EVIDENCE_GRACE_SECONDS, value=str(int(grace_s)),
                      description=output_description(self.pipeline_name, OutputPart.EVIDENCE_GRACE))
        if ledger.key_secret is not None:
            CfnOutput(self, OutputId.KEY_SECRET_ARN, value=ledger.key_secret.secret_arn,
                      description=output_description(self.pipeline_name, OutputPart.KEY_SECRET))
        if urgent_queues is not None:  # where a producer sends urgent jobs, and `sendonce dlq --lane urgent` reads
            CfnOutput(self, OutputId.URGENT_QUEUE_URL, value=urgent_queues.queue.queue_url,
                      description=output_description(self.pipeline_name, OutputPart.URGENT_QUEUE))
            CfnOutput(self, OutputId.URGENT_DEAD_LETTER_QUEUE_URL, value=urgent_queues.dead_letter_queue.queue_url,
                      description=output_description(self.pipeline_name, OutputPart.URGENT_DLQ))
        if outbox is not None:
            CfnOutput(self, OutputId.OUTBOX_TABLE_NAME, value=outbox.table.table_name,
                      description=output_description(self.pipeline_name, OutputPart.OUTBOX))
        if attachments is not None:  # where producers upload
            CfnOutput(self, OutputId.ATTACHMENTS_BUCKET_NAME, value=attachments.bucket.bucket_name,
                      description=output_description(self.pipeline_name, OutputPart.ATTACHMENTS))

    def _consumer_environment(self, props: PipelineProps, lane: Lane, ledger: LedgerParts, evidence: Evidence,
                              attachments: Attachments | None) -> dict[str, str]:
        timeout_s = seconds(props.function_timeout)
        max_receive_count = known(props.max_receive_count)
        grace = props.evidence_grace_period if evidence.ses is not None else None
        outcome_bus = evidence.outcome_events.bus.event_bus_name if evidence.outcome_events is not None else None
        return ConsumerConfig(
            **{field: getattr(props, field) for field in PROP_FIELDS},
            table_name=ledger.table.table_name,
            dead_letter_queue_url=lane.queues.dead_letter_queue.queue_url,
            dedupe_ttl_s=int(props.dedupe_ttl.to_seconds()),
            parallelism=props.parallelism or 1,
            pipeline_name=self.pipeline_name,
            queue_url=lane.queues.queue.queue_url,
            configuration_set=evidence.configuration_set_of(lane.name == Priority.URGENT.value),
            key_secret_id=ledger.key_secret.secret_arn if ledger.key_secret is not None else None,
            time_budget=TimeBudget.for_function_timeout(timeout_s) if timeout_s is not None else None,
            max_send_rate=lane.max_send_rate,
            planned_send_rate=_planned_send_rate(props) if lane.max_send_rate is not None else None,
            lane=lane.name or None,
            lent_send_rate=lane.lent_send_rate,
            max_receive_count=int(max_receive_count) if max_receive_count is not None else None,
            outcome_bus=outcome_bus,
            evidence_grace_ms=int(grace.to_milliseconds()) if grace is not None else None,
            # Only SES's events and the outcome events match on the tag.
            pipeline_tag=self.node.addr if grace is not None or outcome_bus is not None else None,
            attachments_bucket=attachments.bucket.bucket_name if attachments is not None else None,
            sender_identity=self._sender_identity(props)[0],
            queue_retention_s=_whole_seconds(seconds(props.retention_period)),
            max_job_age_s=_whole_seconds(seconds(props.urgent_max_job_age if lane.name == Priority.URGENT.value
                                                 else props.max_job_age)),
            guard_window_s=(_whole_seconds(seconds(props.guard_window))
                            if props.suspected_doubles is not None or props.recipient_cap is not None else None),
            waiting_room_table=self.waiting_room.table.table_name if self.waiting_room is not None else None,
        ).to_env()

    def _sender_identity(self, props: PipelineProps) -> tuple[str, str]:
        """The pipeline's SES identity: its name and its ARN."""
        sender = props.sender
        if isinstance(sender, str):
            return sender, ses_permissions.identity_arn(Stack.of(self), sender)
        return sender.email_identity_name, sender.email_identity_arn

    def _grant_ses(self, props: PipelineProps, function: lambda_.IFunction, configuration_set_name: str | None) -> None:
        stack = Stack.of(self)
        resources = [self._sender_identity(props)[1]]
        if configuration_set_name is not None:
            resources.append(ses_permissions.configuration_set_arn(stack, configuration_set_name))
        resources += [
            stack.format_arn(service="ses", resource="template", resource_name=name) for name in props.template_names
        ]
        # What each SES tenant must have associated (add_ses_tenant): every lane's, each once.
        self._tenant_resources = tuple(dict.fromkeys([*self._tenant_resources, *resources]))
        if props.ses_tenants:  # jobs name their tenants at run time: any tenant of this account and region
            resources.append(ses_permissions.any_tenant_arn(stack))
            acknowledge(function.role or function, wildcard_resource_finding(stack, resources[-1]),
                        "ses_tenants: each job names its tenant at run time; SES's tenant ARNs end in an id SES "
                        "assigns, so no tenant can be named at synth. Only this account's tenants in this region.")
        sender_name = props.sender_name if isinstance(props.sender_name, str) else None
        patterns = ses_permissions.from_address_patterns(sender_name, props.from_addresses)
        function.add_to_role_policy(ses_permissions.send_statement(resources, patterns, props.allow_raw_messages))
        if props.ses_tenants:  # a paused refusal of a tenant's job: is it the tenant's (docs: when SES stops)
            function.add_to_role_policy(ses_permissions.tenant_status_statement(stack))
        if _planned_send_rate(props) is not None:  # a paced lane plans under SES's own rate (docs: sending rate)
            function.add_to_role_policy(ses_permissions.account_read_statement())
            acknowledge(function.role or function, "AwsSolutions-IAM5[Resource::*]",
                        ses_permissions.ACCOUNT_READ_REASON)

    @property
    def outbox_table(self) -> dynamodb.ITable | None:
        return self.outbox.table if self.outbox is not None else None

    def grant_outbox_write(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` write jobs to the outbox in its own TransactWriteItems (needs ``outbox=True``)."""
        if self.outbox is None:
            raise SendOnceConfigurationError("grant_outbox_write needs outbox=True on the SendOnceEmailQueue",
                                             f"{ID_PREFIX}NeedsOutbox", self.node.path)
        return self.outbox.grant_write(grantee)

    def grant_operate(self, grantee: iam.IGrantable) -> iam.Grant:
        """What the `sendonce` command needs: read, resolve and cancel dedupe records, read, redrive and move dead
        letters, find the pipeline in its stack, and the customer keys its data is under."""
        grant = self.table.grant(grantee, "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:UpdateItem",
                                 "dynamodb:DeleteItem", "dynamodb:PutItem")
        grant = grant.combine(self.dead_letter_queue.grant_consume_messages(grantee))
        grant = grant.combine(self.dead_letter_queue.grant(grantee, "sqs:StartMessageMoveTask",
                                                           "sqs:ListMessageMoveTasks"))
        grant = grant.combine(self.queue.grant_send_messages(grantee))
        if self.urgent_queue is not None and self.urgent_dead_letter_queue is not None:
            grant = grant.combine(self.urgent_dead_letter_queue.grant_consume_messages(grantee))
            grant = grant.combine(self.urgent_dead_letter_queue.grant(grantee, "sqs:StartMessageMoveTask",
                                                                      "sqs:ListMessageMoveTasks"))
            grant = grant.combine(self.urgent_queue.grant_send_messages(grantee))
        grant = grant.combine(iam.Grant.add_to_principal(
            grantee=grantee, actions=["cloudformation:DescribeStacks", "cloudformation:DescribeStackResources"],
            resource_arns=[Stack.of(self).stack_id]))
        for key in self._ledger.data_keys:
            grant = grant.combine(key.grant_encrypt_decrypt(grantee))
        if self.key_secret is not None:  # to digest the clear key an operator types
            grant = grant.combine(self.key_secret.grant_read(grantee))
        return grant

    def grant_status_read(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` (an application) read what became of its emails with ``sendonce_producer.status``:
        ``dynamodb:GetItem`` on the dedupe table, decrypting with the table's customer key if it has one, and reading
        the key secret with ``key_privacy``."""
        grant = self._grant_key_secret(self.table.grant(grantee, "dynamodb:GetItem"), grantee)
        if self.table.encryption_key is None:
            return grant
        return grant.combine(self.table.encryption_key.grant_decrypt(grantee))

    def _grant_key_secret(self, grant: iam.Grant, grantee: iam.IGrantable) -> iam.Grant:
        # With key_privacy, status and cancel digest the clear key with the pipeline's secret.
        return grant if self.key_secret is None else grant.combine(self.key_secret.grant_read(grantee))

    def grant_cancel(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` cancel emails with ``sendonce_producer.cancel``: ``dynamodb:PutItem`` on the dedupe table
        (the tombstone, conditional on no live record), the table's customer key if it has one, and the key secret
        with ``key_privacy``."""
        grant = self._grant_key_secret(self.table.grant(grantee, "dynamodb:PutItem"), grantee)
        if self.table.encryption_key is None:
            return grant
        return grant.combine(self.table.encryption_key.grant_encrypt_decrypt(grantee))

    def grant_attach(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` (a producer) upload attachments to ``attachments_bucket`` for its jobs to name:
        ``s3:PutObject`` on the bucket's objects, nothing else (no read, no list: the producer puts each object only
        if no object has its key), and ``kms:GenerateDataKey`` and ``kms:Decrypt`` on the bucket's customer key if it
        has one (a multipart upload needs both). Needs ``attachments_bucket``."""
        if self._attachments is None:
            raise SendOnceConfigurationError("grant_attach needs attachments_bucket=True (or an s3.IBucket) on the "
                                             "SendOnceEmailQueue", f"{ID_PREFIX}NeedsAttachmentsBucket",
                                             self.node.path)
        grant = self._attachments.grant_write(grantee)
        if isinstance(grantee, Construct):  # cdk-nag flags the object wildcard on the producer's own role
            acknowledge(grantee, objects_finding(self._attachments.bucket),
                        "PutObject on the attachments bucket's objects (grant_attach): each attachment's key derives "
                        "from its job's key and content, known only when the job is made.")
        return grant

    def grant_enqueue(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` (a producer) send jobs to the queue (and the urgent queue, with ``urgent_lane``),
        including the KMS use a customer key needs, and with ``key_privacy`` read the key secret (a job's
        ``tenant`` travels as its digest)."""
        grant = self.queue.grant_send_messages(grantee)
        if self.urgent_queue is not None:
            grant = grant.combine(self.urgent_queue.grant_send_messages(grantee))
        return self._grant_key_secret(grant, grantee)

    def add_ses_tenant(self, tenant_name: str, *, reputation_policy: ReputationPolicy | None = None,
                       suppression: TenantSuppression | None = None) -> ses.CfnTenant:
        """An SES tenant (``AWS::SES::Tenant``) with everything this pipeline sends with associated: the sender
        identity, the configuration set and the templates of ``template_names``. SES sends a job whose ``tenant``
        is ``tenant_name`` (with ``ses_tenants``) only when all of them are associated with it. For tenants that
        come and go with customers, call SES's ``CreateTenant`` and ``CreateTenantResourceAssociation`` with
        ``ses_tenant_resources`` instead.

        :param reputation_policy: the SES-managed policy for how readily SES pauses the tenant on its reputation
            findings (``ReputationPolicy.NONE``, ``STANDARD`` or ``STRICT``). Default: SES's, standard.
        :param suppression: the tenant's suppression list: ``TenantSuppression()`` keeps its own, added to on hard
            bounces and complaints, so one customer's bad addresses never suppress another's mail. Default: SES's,
            the account's list.
        :returns: the tenant resource; its policy and suppression list are property overrides, not its attributes."""
        if not self._ses_tenants:
            raise SendOnceConfigurationError("add_ses_tenant needs ses_tenants=True on the SendOnceEmailQueue: "
                                             "without it no send names a tenant", f"{ID_PREFIX}NeedsSesTenants",
                                             self.node.path)
        try:
            check_tenant(tenant_name)
        except InvalidTenant as error:
            raise SendOnceConfigurationError(f"add_ses_tenant: {error}; pick a name SES and SQS both take",
                                             f"{ID_PREFIX}InvalidTenantName", self.node.path) from None
        policy, suppression_attributes = self._tenant_settings(reputation_policy, suppression)
        tenant = ses.CfnTenant(
            self, f"SesTenant{tenant_name}", tenant_name=tenant_name,
            resource_associations=[ses.CfnTenant.ResourceAssociationProperty(resource_arn=arn)
                                   for arn in self._tenant_resources])
        # As property overrides, not CfnTenant's keyword arguments: the L1 gained them only in aws-cdk-lib 2.275,
        # and the oldest aws-cdk-lib this library supports is older.
        if policy is not None:
            stack = Stack.of(self)
            tenant.add_property_override("ReputationEntity.Policy.ReputationEntityPolicy",
                                         policy.arn(stack.partition, stack.region))
        if suppression_attributes is not None:
            tenant.add_property_override("SuppressionAttributes", {
                "SuppressedReasons": [reason.value for reason in suppression_attributes.reasons],
                "SuppressionScope": suppression_attributes.scope.value})
        return tenant

    def _tenant_settings(self, policy: object, suppression: object) -> tuple[ReputationPolicy | None,
                                                                              TenantSuppression | None]:
        """``add_ses_tenant``'s settings as SES takes them, or a synth error naming the argument, the value, the
        rule and the fix."""
        try:
            chosen = None if policy is None else reputation_policy(policy)
        except InvalidTenantSetting as error:
            raise SendOnceConfigurationError(f"add_ses_tenant: {error}; for example "
                                             "reputation_policy=ReputationPolicy.STRICT, or leave it out for SES's "
                                             "standard", f"{ID_PREFIX}InvalidSesTenantSettings",
                                             self.node.path) from None
        if suppression is not None and not isinstance(suppression, TenantSuppression):
            raise SendOnceConfigurationError(f"add_ses_tenant: suppression ({suppression!r}) must be a "
                                             "TenantSuppression; for example suppression=TenantSuppression() (the "
                                             "tenant's own list, on bounces and complaints)",
                                             f"{ID_PREFIX}InvalidSesTenantSettings", self.node.path)
        return chosen, suppression

    @property
    def ses_tenant_resources(self) -> tuple[str, ...]:
        """The ARNs every SES tenant this pipeline sends for must have associated (CreateTenantResourceAssociation):
        the sender identity, the configuration set and the granted templates."""
        return self._tenant_resources


def _whole_seconds(value: float | None) -> int | None:
    return None if value is None else int(value)


def _job_message_size(props: PipelineProps) -> int:
    """A job queue's maximum message size: the prop, else sendonce's default set in the template, never SQS's own
    (1 MiB since 2025), so the batch payload rule and the docs hold for a queue made today."""
    return SQS_DEFAULT_MESSAGE_BYTES if props.max_message_size_bytes is None else props.max_message_size_bytes


def _planned_send_rate(props: PipelineProps) -> float | None:
    """The pipeline's whole planned rate, which SES's own MaxSendRate may cap: ``send_rate``, or ``max_send_rate``
    over the instances that run; None when unpaced or unknown at synth."""
    if props.send_rate is not None:
        return float(props.send_rate) if is_known(props.send_rate) else None
    if props.max_send_rate is None or props.paced_concurrency is None:
        return None
    rate, instances = props.max_send_rate, props.paced_concurrency
    return float(rate) * int(instances) if is_known(rate) and is_known(instances) else None
