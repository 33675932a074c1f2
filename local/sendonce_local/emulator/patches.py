"""Every patch the emulator puts on moto (5.2), in the order it installs them: what each patches, and why.

This is the one place that says why each exists; the modules that hold them say how. Each ``install`` is idempotent
(:func:`.wrap.wrap_once`): several emulators started in one process patch moto once. Three patches wrap one method
(SESv2 SendEmail): the last installed runs first, so SES's stops (account paused, tenant disabled, daily quota)
refuse a send before SES's sending rate counts it, and the sending rate refuses one before SES's logs record it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .cfn_buckets import configure_cloudformation_buckets
from .cfn_secrets import teach_cloudformation_secrets
from .cfn_ses_tenants import teach_cloudformation_ses_tenants
from .cloudformation import make_cloudformation_redeployable
from .request_counts import count_requests
from .sent_mail_api import serve_ses_sends
from .service_patches import (
    hand_event_sources_to_the_runners,
    make_dynamodb_writes_atomic,
    make_sqs_linear,
    make_sqs_message_moves_atomic,
    match_no_event_to_scheduled_rules,
)
from .ses_account import answer_identities_verified, play_ses_account, serve_ses_account_control
from .ses_limits import limit_ses_sends
from .ses_publisher import record_ses_sends
from .ses_tenants import play_ses_tenants, serve_ses_reputation_control
from .sqs_fair_queues import play_sqs_fair_queues
from .sqs_message_size import count_sqs_message_sizes


@dataclass(frozen=True)
class Patch:
    patches: str  # what of moto's it replaces or wraps
    why: str  # what moto does, and what the service does instead
    install: Callable[[], None]


PATCHES = (
    Patch("DynamoDBBackend.put_item, update_item, delete_item, transact_write_items (one lock)",
          "moto checks a condition and writes the item without a lock, so two racing conditional writes can both "
          "win, which DynamoDB never allows: serialised, a race fails for the consumer's fault only",
          make_dynamodb_writes_atomic),
    Patch("SQSBackend.send_message(_batch), delete_message(_batch), change_message_visibility(_batch), "
          "receive_message (one lock; a long poll waits outside it)",
          "moto's SQS moves messages between its lists without a lock: under concurrent pollers a receive fails "
          "inside moto (`list.remove(x): x not in list`, a 500) and a message can be handed out twice",
          make_sqs_message_moves_atomic),
    Patch("moto.sqs.models.unix_time(_millis), SQSBackend.is_message_valid_based_on_retention_period",
          "moto's SQS reads the clock through datetime arithmetic for every message it looks at and computes every "
          "attribute of a queue to check one message's retention, so a receive from n messages costs O(n^2): a few "
          "hundred waiting jobs slowed each call past the consumer's timeouts. Same answers, linear time",
          make_sqs_linear),
    Patch("SQS Queue.messages (the order a receive takes them in) and SQSBackend.receive_message (remembered)",
          "moto hands out a standard queue's messages in the order they were sent, so one tenant's flood holds "
          "every other tenant's behind it; SQS's fair queues hand quiet tenants' messages out first (played "
          "approximately, see .sqs_fair_queues)",
          play_sqs_fair_queues),
    Patch("CloudFormationBackend change sets, outputs, parameters, rollback, FIFO queue names, alarms",
          "moto's CloudFormation cannot take `cdk deploy` twice on one emulator (see .cloudformation)",
          make_cloudformation_redeployable),
    Patch("Queue and Table lambda_event_source_mappings (always empty)",
          "moto delivers to a mapped function itself, through Docker, inside the write that feeds it; with no "
          "Docker, for SQS it receives the batch (raising its receive count, hiding it) and fails, for a stream it "
          "may drop the shard's records. The local runners play the mappings instead; they stay deployed and "
          "readable",
          hand_event_sources_to_the_runners),
    Patch("SESV2Response.send_email (logged with its configuration set, tags, tenant, attachments, headers and "
          "tracking overrides)",
          "moto's SES keeps none of them (it accepts TenantName, Attachments, Headers and ConfigurationOverrides "
          "and drops them; it has "
          "no tenants to check a name against) and publishes no "
          "events: the local publisher (.ses_publisher) plays SES's event publishing from this log, and the log "
          "keeps each attachment's name, type, disposition, content id, size and SHA-256 (.ses_parts) and each "
          "header, so a test can see what SES received",
          record_ses_sends),
    Patch("moto's API application (GET /moto-api/sendonce/ses-sends added)",
          "moto has no way to read over HTTP what its SES accepted beyond subjects and bodies (its data.json "
          "fails once a Lambda function exists): the endpoint answers the log of sends above as JSON",
          serve_ses_sends),
    Patch("SESV2Response.send_email (a token bucket in front of it, off until a scenario sets a rate)",
          "moto's SES has no sending rate: a load scenario gives it one, refusing the excess with SES's own "
          "throttling error",
          limit_ses_sends),
    Patch("SESV2Response (GetAccount, PutAccountSendingAttributes, PutConfigurationSetSendingOptions added; "
          "SendEmail checked before the sending rate: the account, the tenant the send names (.ses_tenants), its "
          "configuration set, the daily quota); ConfigurationSet.to_dict_v2 (SendingEnabled a boolean)",
          "moto's SES has no account, no tenants, no set's pause and no daily quota: SendEmail never stops, and "
          "GetConfigurationSet answers a set made without SendingOptions as not sending. SES refuses a send while "
          "the account's sending is paused, its tenant is disabled or its configuration set is paused "
          "(SendingPausedException) and past the daily quota (LimitExceededException); the state is a moto "
          "backend's, so moto's reset forgets it",
          play_ses_account),
    Patch("SESV2Response (CreateTenant, GetTenant, ListTenants, DeleteTenant, PutTenantSuppressionAttributes and "
          "the tenants' reputation entities with their policies added: .ses_tenants, moved out of the account's "
          "patch above, whose SendEmail check asks it whether a tenant is disabled)",
          "moto's SES has no tenants: SES's tenant is DISABLED when its customer-managed or its SES-managed status "
          "is, and then SES refuses its sends (the patch above); the tenants are a moto backend's, so moto's reset "
          "forgets them",
          play_ses_tenants),
    Patch("moto.ses.models.EmailIdentity (VerifiedForSendingStatus)",
          "moto's SES sends from every identity it holds, yet GetEmailIdentity answers VerifiedForSendingStatus "
          "false for each; SES answers true for an identity it sends from, which is what the schedule watch asks "
          "to end a stop of the pipeline's setup (an identity whose verification lapsed, verified again)",
          answer_identities_verified),
    Patch("moto's API application (POST /moto-api/sendonce/ses-account added)",
          "SES has no API for the daily quota, raised through support: a test sets it here",
          serve_ses_account_control),
    Patch("moto's API application (POST /moto-api/sendonce/ses-reputation added: .ses_tenants, moved out of the "
          "account's control above, which served both)",
          "SES has no API for its own reputation status of a tenant, set on its findings: a test sets it here",
          serve_ses_reputation_control),
    Patch("SQSBackend.send_message and send_message_batch (a message's size: .sqs_message_size)",
          "moto compares a message body's length in characters with the queue's MaximumMessageSize; SQS counts the "
          "body's UTF-8 bytes and every message attribute's name, data type and value, so a delayed copy whose "
          "attributes take a job past the limit was accepted, which SQS refuses (a single send with "
          "InvalidParameterValue, a batch entry as a failed entry, a batch over 1 MiB in all with "
          "BatchRequestTooLong)",
          count_sqs_message_sizes),
    Patch("BaseResponse.call_action (counted)",
          "a scenario reports AWS calls per email, counted by the emulator rather than by the consumer, and SQS's "
          "by queue (a burst's pacing cost is its job queue's, apart from the evidence queue's)",
          count_requests),
    Patch("CloudFormation's model list (AWS::SecretsManager::Secret added)",
          "moto's CloudFormation skips the type, so a stack with key_privacy would deploy without its secret",
          teach_cloudformation_secrets),
    Patch("CloudFormation's model list (AWS::SES::Tenant added: .cfn_ses_tenants)",
          "moto's CloudFormation skips the type, so add_ses_tenant would deploy no tenant, and `sendonce tenants` "
          "would show none of its settings",
          teach_cloudformation_ses_tenants),
    Patch("FakeBucket.create_from_cloudformation_json (LifecycleConfiguration, PublicAccessBlockConfiguration)",
          "moto's CloudFormation sets only a bucket's encryption and tags, so an attachments bucket would deploy "
          "with no expiry and no public access block; they are set through moto's own S3 calls",
          configure_cloudformation_buckets),
    Patch("events Rule.send_to_targets (a scheduled rule matches no event)",
          "moto matches every event put on a bus against a rule with only a schedule (the quota watch's), then "
          "fails the whole PutEvents on its Lambda target; on AWS such a rule matches no event",
          match_no_event_to_scheduled_rules),
)


def install_patches() -> None:
    """Install every patch, in order (idempotent)."""
    for patch in PATCHES:
        patch.install()
