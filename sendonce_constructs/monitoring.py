"""The pipeline's metrics, its default alarms and its dashboard, built from the construct's own resources."""

from __future__ import annotations

from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from sendonce_contract.schema import METRIC_DIMENSION as DIMENSION
from sendonce_contract.schema import METRIC_LANE_DIMENSION as LANE_DIMENSION
from sendonce_contract.schema import METRIC_NAMESPACE as NAMESPACE
from sendonce_contract.schema import SES_BOUNCE, SES_COMPLAINT, SES_SEND, DeadLetter, Metric, ReasonCode

from .errors import ID_PREFIX, SendOnceConfigurationError
from .evidence import SesEvidence

# Reputation. SES reviews an account at a 5% bounce rate and a 0.1% complaint rate (and may pause sending at 10% and
# 0.5%); it asks senders to stay below 2% bounces. The alarms fire at 2% and 0.05%: early enough to act (clean a
# list, stop a campaign) while the account's rates, which every pipeline of the account shares, are still below
# review. The rates are per email SES accepted for this pipeline, over a window long enough to be a rate rather than
# noise, and only once the window holds REPUTATION_MIN_EMAILS emails (1 bounce in 10 emails is no reputation).
BOUNCE_RATE_ALARM_PERCENT = 2.0
COMPLAINT_RATE_ALARM_PERCENT = 0.05
SES_REVIEW_BOUNCE_PERCENT = 5.0
SES_REVIEW_COMPLAINT_PERCENT = 0.1
REPUTATION_WINDOW = Duration.hours(6)
REPUTATION_MIN_EMAILS = 200
# Jobs a minute put back for DynamoDB's trouble that raise the alarm: a few are a blip a delayed copy absorbs.
LEDGER_TROUBLE_PER_MINUTE = 10


class PipelineMetrics:
    """``metric_*`` helpers, as aws-cdk-lib's constructs have them; options are ``cloudwatch.MetricOptions``.
    Mixed into the pipeline, which gives the attributes below."""

    pipeline_name: str
    queue: sqs.IQueue
    dead_letter_queue: sqs.IQueue
    function: lambda_.IFunction
    evidence: SesEvidence | None
    urgent_queue: sqs.IQueue | None
    urgent_dead_letter_queue: sqs.IQueue | None
    urgent_function: lambda_.IFunction | None

    def metric(self, metric_name: str, **options: Any) -> cloudwatch.Metric:
        """Any metric the consumer emits (namespace ``sendonce``, dimension ``Pipeline``), summed over 5 minutes;
        with ``urgent_lane``, both lanes' records together."""
        options.setdefault("statistic", "Sum")
        options.setdefault("period", Duration.minutes(5))
        return cloudwatch.Metric(
            namespace=NAMESPACE, metric_name=metric_name, dimensions_map={DIMENSION: self.pipeline_name}, **options
        )

    def metric_of_lane(self, lane: str, metric_name: str, **options: Any) -> cloudwatch.Metric:
        """A consumer metric of one lane (``"bulk"`` or ``"urgent"``, with ``urgent_lane``): dimensions ``Pipeline``
        and ``Lane``, which the consumers emit beside the ``Pipeline``-only one."""
        options.setdefault("statistic", "Sum")
        options.setdefault("period", Duration.minutes(5))
        return cloudwatch.Metric(
            namespace=NAMESPACE, metric_name=metric_name,
            dimensions_map={DIMENSION: self.pipeline_name, LANE_DIMENSION: lane}, **options
        )

    def metric_urgent_approximate_age_of_oldest_message(self, **options: Any) -> cloudwatch.Metric:
        """The age of the oldest job on the urgent queue (needs ``urgent_lane``)."""
        return self._urgent(self.urgent_queue, "metric_urgent_approximate_age_of_oldest_message"
                            ).metric_approximate_age_of_oldest_message(**options)

    def metric_urgent_dead_letter_queue_depth(self, **options: Any) -> cloudwatch.Metric:
        """Jobs in the urgent lane's dead-letter queue (needs ``urgent_lane``)."""
        options.setdefault("statistic", "Maximum")
        return self._urgent(self.urgent_dead_letter_queue, "metric_urgent_dead_letter_queue_depth"
                            ).metric_approximate_number_of_messages_visible(**options)

    def _urgent(self, queue: sqs.IQueue | None, name: str) -> sqs.IQueue:
        if queue is None:
            raise SendOnceConfigurationError(f"{name} needs urgent_lane=True", f"{ID_PREFIX}NeedsUrgentLane",
                                             self.pipeline_name)
        return queue

    def metric_emails_sent(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.EMAILS_SENT, **options)

    def metric_duplicates_skipped(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.DUPLICATES_SKIPPED, **options)

    def metric_in_flight_retries(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.IN_FLIGHT_RETRIES, **options)

    def metric_unknown_records(self, **options: Any) -> cloudwatch.Metric:
        """Keys recorded UNKNOWN: a worker died mid-send, SES's events did not settle it, and never-resend did not
        send it again."""
        return self.metric(Metric.UNKNOWN_RECORDS, **options)

    def metric_quota_exhausted(self, **options: Any) -> cloudwatch.Metric:
        """Jobs parked because SES's 24-hour quota is used up (15 minutes a copy, while the lane asks SES once a
        minute)."""
        return self.metric(Metric.QUOTA_EXHAUSTED, **options)

    def metric_ses_stopped(self, **options: Any) -> cloudwatch.Metric:
        """Jobs parked while SES stops sending: a paused account or tenant, the pipeline's setup refused, or the
        daily quota (docs: when SES stops sending); with ``tenant_metrics``, per tenant too."""
        return self.metric(Metric.SES_STOPPED, **options)

    def metric_paced(self, **options: Any) -> cloudwatch.Metric:
        """Jobs put back because send_rate left no send slot in the invocation."""
        return self.metric(Metric.PACED, **options)

    def metric_recipients_not_allowed(self, **options: Any) -> cloudwatch.Metric:
        """Jobs refused to the DLQ because a recipient is outside allowed_recipients (a staging stage)."""
        return self.metric(Metric.RECIPIENTS_NOT_ALLOWED, **options)
    def metric_suspected_doubles(self, **options: Any) -> cloudwatch.Metric:
        """Keys first seen sending what their recipients got under another key in the guard's window
        (``suspected_doubles``): a producer whose keys change between attempts."""
        return self.metric(Metric.SUSPECTED_DOUBLES, **options)

    def metric_recipient_capped(self, **options: Any) -> cloudwatch.Metric:
        """Jobs held in the DLQ because a recipient reached ``recipient_cap`` in the guard's window."""
        return self.metric(Metric.RECIPIENT_CAPPED, **options)

    def metric_contract_too_new(self, **options: Any) -> cloudwatch.Metric:
        """Jobs put back because they name a newer job contract version than the deployed consumer knows."""
        return self.metric(Metric.CONTRACT_TOO_NEW, **options)

    def metric_double_sends(self, **options: Any) -> cloudwatch.Metric:
        """Keys for which SES reported a second email: the residual when SES's events for the first were lost."""
        return self.metric(Metric.DOUBLE_SENDS, **options)

    def metric_sends_confirmed(self, **options: Any) -> cloudwatch.Metric:
        """Keys whose send SES's events confirmed (the first event for each email)."""
        return self.metric(Metric.SENDS_CONFIRMED, **options)

    def metric_awaiting_evidence(self, **options: Any) -> cloudwatch.Metric:
        """Records of dead workers' sends put back to wait for SES's events."""
        return self.metric(Metric.AWAITING_EVIDENCE, **options)

    def metric_evidence_dead_letter_queue_depth(self, **options: Any) -> cloudwatch.Metric:
        options.setdefault("statistic", "Maximum")
        if self.evidence is None:
            raise SendOnceConfigurationError("metric_evidence_dead_letter_queue_depth needs ses_events=True",
                                             f"{ID_PREFIX}NeedsSesEvents", self.pipeline_name)
        return self.evidence.dead_letter_queue.metric_approximate_number_of_messages_visible(**options)

    def metric_ledger_throttles(self, **options: Any) -> cloudwatch.Metric:
        """Jobs put back because DynamoDB throttled the consumer before the send."""
        return self.metric(Metric.LEDGER_THROTTLES, **options)

    def metric_ledger_errors(self, **options: Any) -> cloudwatch.Metric:
        """Jobs put back because DynamoDB timed out, failed with a 5xx or could not be reached before the send."""
        return self.metric(Metric.LEDGER_ERRORS, **options)

    def metric_quota_used_percent(self, **options: Any) -> cloudwatch.Metric:
        """The share of SES's 24-hour quota used, as the quota watch last read it (Maximum)."""
        options.setdefault("statistic", "Maximum")
        return self.metric(Metric.QUOTA_USED_PERCENT, **options)

    def metric_ambiguous_sends(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.AMBIGUOUS_SENDS, **options)

    def metric_key_conflicts(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.KEY_CONFLICTS, **options)

    def metric_poison_messages(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.POISON_MESSAGES, **options)

    def metric_ses_throttles(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.SES_THROTTLES, **options)

    def metric_ses_refusals(self, **options: Any) -> cloudwatch.Metric:
        return self.metric(Metric.SES_REFUSALS, **options)

    def metric_bounce_rate(self, window: Duration = REPUTATION_WINDOW) -> cloudwatch.MathExpression:
        """Bounces per email SES accepted for this pipeline, in percent, over ``window`` (from the recorder's counts
        of SES's Bounce and Send events; 0 while the window holds fewer than REPUTATION_MIN_EMAILS emails)."""
        return self._rate(SES_BOUNCE.metric, "Bounce rate (%)", window)

    def metric_complaint_rate(self, window: Duration = REPUTATION_WINDOW) -> cloudwatch.MathExpression:
        """Complaints per email SES accepted for this pipeline, in percent, over ``window``."""
        return self._rate(SES_COMPLAINT.metric, "Complaint rate (%)", window)

    def _rate(self, events: str, label: str, window: Duration) -> cloudwatch.MathExpression:
        if self.evidence is None:
            raise SendOnceConfigurationError(f"the {label.lower()} is counted from SES's events: it needs "
                                             "ses_events=True", f"{ID_PREFIX}NeedsSesEvents", self.pipeline_name)
        return cloudwatch.MathExpression(
            expression=f"IF(sends >= {REPUTATION_MIN_EMAILS}, 100 * {events.lower()} / sends, 0)",
            using_metrics={events.lower(): self.metric(events, period=window),
                           "sends": self.metric(SES_SEND.metric, period=window)},
            label=label, period=window,
        )

    def metric_record_latency(self, **options: Any) -> cloudwatch.Metric:
        options.setdefault("statistic", "p90")
        return self.metric(Metric.RECORD_LATENCY, **options)

    def metric_approximate_age_of_oldest_message(self, **options: Any) -> cloudwatch.Metric:
        return self.queue.metric_approximate_age_of_oldest_message(**options)

    def metric_dead_letter_queue_depth(self, **options: Any) -> cloudwatch.Metric:
        options.setdefault("statistic", "Maximum")
        return self.dead_letter_queue.metric_approximate_number_of_messages_visible(**options)


def build_alarms(
    pipeline: PipelineMetrics, scope: Construct, oldest_message_threshold: Duration, topic: sns.ITopic | None,
    quota_threshold_percent: float | None = None, urgent_oldest_message_threshold: Duration | None = None,
    suspected_doubles: bool = False, recipient_cap: bool = False,
) -> dict[str, cloudwatch.Alarm]:
    """Each a thing an operator must look at (more with SES events and the quota watch); all notify ``topic``."""
    one_minute = Duration.minutes(1)
    specs: dict[str, tuple[cloudwatch.Metric | cloudwatch.MathExpression, float, str]] = {
        "DeadLetterQueueNotEmpty": (
            pipeline.metric_dead_letter_queue_depth(period=one_minute), 1,
            "Jobs in the dead-letter queue: malformed, refused by SES, or failed maxReceiveCount times. "
            f"Read {DeadLetter.REASON} on each message.",
        ),
        "OldestMessageTooOld": (
            pipeline.metric_approximate_age_of_oldest_message(period=one_minute, statistic="Maximum"),
            oldest_message_threshold.to_seconds(),
            f"A job has waited over {oldest_message_threshold.to_human_string()}: the consumer is failing, "
            "throttled or capped too low.",
        ),
        Metric.UNKNOWN_RECORDS: (
            pipeline.metric_unknown_records(period=one_minute), 1,
            "A worker died after its send may have reached SES, SES's events did not settle it, and never-resend "
            "did not send again. Check the key (sendonce status KEY) and the recipient's mailbox, then decide.",
        ),
        Metric.QUOTA_EXHAUSTED: (
            pipeline.metric_quota_exhausted(period=one_minute), 1,
            "SES's 24-hour sending quota is used up: jobs are parked (delayed copies, 15 minutes each) while the "
            "pipeline asks SES once a minute; none is dead-lettered while the queue keeps it. Raise the quota with "
            "SES, or let the window pass.",
        ),
        Metric.SES_STOPPED: (
            pipeline.metric_ses_stopped(period=one_minute), 1,
            "SES stopped sending: the account or a tenant paused, the sender identity unverified, the configuration "
            "set missing, or the daily quota. Jobs are parked (delayed copies, 15 minutes each) while the pipeline "
            "asks SES once a minute; none is lost. The Email Sending Stopped outcome event and the consumer's log name "
            "the reason; the operating page says what to do.",
        ),
        Metric.CONTRACT_TOO_NEW: (
            pipeline.metric_contract_too_new(period=one_minute), 1,
            "Producers send jobs of a newer contract version than this consumer knows: the jobs wait (delayed "
            "copies, about five minutes each), none is dead-lettered. Upgrade the construct (the consumer) first.",
        ),
        "LedgerTrouble": (
            cloudwatch.MathExpression(
                expression="throttles + errors", label="DynamoDB trouble before the send", period=one_minute,
                using_metrics={"throttles": pipeline.metric_ledger_throttles(period=one_minute),
                               "errors": pipeline.metric_ledger_errors(period=one_minute)}),
            LEDGER_TROUBLE_PER_MINUTE,
            "DynamoDB throttled, timed out or failed the consumer's ledger calls: jobs are waiting (delayed copies, "
            "no receive spent), none is dead-lettered. Check the table's throttling and the network path.",
        ),
        "FunctionErrors": (
            pipeline.function.metric_errors(period=one_minute, statistic="Sum"), 1,
            "The consumer failed whole invocations (deployment or configuration error): batches are redelivered.",
        ),
    }
    if pipeline.evidence is not None:
        specs[Metric.DOUBLE_SENDS] = (
            pipeline.metric_double_sends(period=one_minute), 1,
            "SES reported a second email for one key: SES's events for the first were lost or late past the "
            "evidence grace period. `sendonce doubles` lists the keys with both SES message ids.",
        )
        specs["EvidenceDeadLetterQueueNotEmpty"] = (
            pipeline.metric_evidence_dead_letter_queue_depth(period=one_minute), 1,
            f"SES events the recorder could not read or record ({DeadLetter.REASON} on each message).",
        )
        specs["BounceRate"] = (
            pipeline.metric_bounce_rate(), BOUNCE_RATE_ALARM_PERCENT,
            f"This pipeline's bounce rate reached {BOUNCE_RATE_ALARM_PERCENT:g}% over "
            f"{REPUTATION_WINDOW.to_human_string()} (SES reviews the account at {SES_REVIEW_BOUNCE_PERCENT:g}%): "
            "stop sending to addresses that bounced, check where the addresses come from.",
        )
        specs["ComplaintRate"] = (
            pipeline.metric_complaint_rate(), COMPLAINT_RATE_ALARM_PERCENT,
            f"This pipeline's complaint rate reached {COMPLAINT_RATE_ALARM_PERCENT:g}% over "
            f"{REPUTATION_WINDOW.to_human_string()} (SES reviews the account at {SES_REVIEW_COMPLAINT_PERCENT:g}%): "
            "recipients mark these emails as spam; check what is sent and to whom.",
        )
    if suspected_doubles:
        specs[Metric.SUSPECTED_DOUBLES] = (
            pipeline.metric_suspected_doubles(period=one_minute), 1,
            "A job's recipients got the same content under another key within the guard's window: a producer whose "
            "keys change between attempts (an SQS message id, a timestamp, a retry count). The Email Suspected "
            "Double event names both keys; fix the producer's keys (see choosing a key).",
        )
    if recipient_cap:
        specs[Metric.RECIPIENT_CAPPED] = (
            pipeline.metric_recipient_capped(period=one_minute), 1,
            "A recipient reached recipient_cap in the guard's window: the jobs over it are in the DLQ "
            f"({ReasonCode.RECIPIENT_CAP.value}), unsent. Find the loop or the mis-keyed producer, then redrive "
            "them (sendonce dlq redrive --reason "
            f"{ReasonCode.RECIPIENT_CAP.value}) or let them be.",
        )
    if pipeline.urgent_function is not None and urgent_oldest_message_threshold is not None:
        specs.update(_urgent_specs(pipeline, pipeline.urgent_function, urgent_oldest_message_threshold))
    if quota_threshold_percent is not None:
        specs["QuotaNearlyUsed"] = (
            pipeline.metric_quota_used_percent(), quota_threshold_percent,
            f"SES's 24-hour sending quota is {quota_threshold_percent:g}% used (read every five minutes by the "
            "quota watch): ask SES for more before jobs start waiting.",
        )
    alarms = {}
    for name, (metric, threshold, description) in specs.items():
        alarm = metric.create_alarm(
            scope,
            name,
            threshold=threshold,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        if topic is not None:
            alarm.add_alarm_action(actions.SnsAction(topic))
        alarms[name] = alarm
    return alarms


def _urgent_specs(pipeline: PipelineMetrics, function: lambda_.IFunction, oldest_message_threshold: Duration
                  ) -> dict[str, tuple[cloudwatch.Metric, float, str]]:
    """The urgent lane's own alarms: its DLQ, its oldest job (a tighter threshold than bulk's), its function."""
    one_minute = Duration.minutes(1)
    return {
        "UrgentDeadLetterQueueNotEmpty": (
            pipeline.metric_urgent_dead_letter_queue_depth(period=one_minute), 1,
            "Urgent jobs in the urgent lane's dead-letter queue: malformed, refused by SES, or failed "
            f"maxReceiveCount times. Read {DeadLetter.REASON} on each message (sendonce dlq list --lane urgent).",
        ),
        "UrgentOldestMessageTooOld": (
            pipeline.metric_urgent_approximate_age_of_oldest_message(period=one_minute, statistic="Maximum"),
            oldest_message_threshold.to_seconds(),
            f"An urgent job has waited over {oldest_message_threshold.to_human_string()}: the urgent consumer is "
            "failing, throttled, or its share of send_rate is too small for its traffic.",
        ),
        "UrgentFunctionErrors": (
            function.metric_errors(period=one_minute, statistic="Sum"), 1,
            "The urgent lane's consumer failed whole invocations (deployment or configuration error): batches are "
            "redelivered.",
        ),
    }


def build_dashboard(pipeline: PipelineMetrics, scope: Construct, alarms: dict[str, cloudwatch.Alarm]) -> (
    cloudwatch.Dashboard
):
    dashboard = cloudwatch.Dashboard(scope, "Dashboard")
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="Emails", width=12, left=[
            pipeline.metric_emails_sent(), pipeline.metric_duplicates_skipped(), pipeline.metric_in_flight_retries(),
        ]),
        cloudwatch.GraphWidget(title="Needs a look", width=12, left=[
            pipeline.metric_unknown_records(), pipeline.metric_double_sends(), pipeline.metric_ambiguous_sends(),
            pipeline.metric_awaiting_evidence(), pipeline.metric_key_conflicts(), pipeline.metric_quota_exhausted(),
            pipeline.metric_poison_messages(), pipeline.metric_ses_refusals(), pipeline.metric_ses_throttles(),
        ]),
    )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="Queue", width=12, left=[pipeline.metric_approximate_age_of_oldest_message()],
                               right=[pipeline.metric_dead_letter_queue_depth()]),
        cloudwatch.GraphWidget(title="Record latency (p90, ms)", width=12, left=[pipeline.metric_record_latency()]),
    )
    if pipeline.evidence is not None:
        dashboard.add_widgets(cloudwatch.GraphWidget(
            title="Reputation (% of emails, SES reviews at 5% bounces, 0.1% complaints)", width=24,
            left=[pipeline.metric_bounce_rate()], right=[pipeline.metric_complaint_rate()],
            left_annotations=[cloudwatch.HorizontalAnnotation(value=BOUNCE_RATE_ALARM_PERCENT, label="bounce alarm")],
            right_annotations=[cloudwatch.HorizontalAnnotation(value=COMPLAINT_RATE_ALARM_PERCENT,
                                                               label="complaint alarm")],
        ))
    if pipeline.urgent_queue is not None:
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Emails sent by lane", width=12, left=[
                pipeline.metric_of_lane(lane, Metric.EMAILS_SENT, label=lane) for lane in ("bulk", "urgent")]),
            cloudwatch.GraphWidget(title="Urgent queue", width=12,
                                   left=[pipeline.metric_urgent_approximate_age_of_oldest_message()],
                                   right=[pipeline.metric_urgent_dead_letter_queue_depth()]),
        )
    dashboard.add_widgets(
        cloudwatch.GraphWidget(title="DynamoDB trouble (jobs put back)", width=12,
                               left=[pipeline.metric_ledger_throttles(), pipeline.metric_ledger_errors()]),
        cloudwatch.GraphWidget(title="SES 24-hour quota used (%)", width=12,
                               left=[pipeline.metric_quota_used_percent()]),
    )
    if alarms:
        dashboard.add_widgets(cloudwatch.AlarmStatusWidget(title="Alarms", width=24, alarms=list(alarms.values())))
    return dashboard
