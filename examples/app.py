"""An app with one SendOnceEmailQueue: `npx cdk synth` or `npx cdk deploy -c sender=YOUR_IDENTITY` from the
repository root (the sender is an SES identity verified in the account: a domain or an address).

`-c stage=staging` deploys it as a staging stage: it may email SES's mailbox simulator and the team's QA domain
only, so a job copied from production cannot reach a customer (it goes to the DLQ as `recipient-not-allowed`).
"""

import os

import aws_cdk as cdk
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import Construct

from sendonce_constructs import SES_MAILBOX_SIMULATOR, OnSuspectedDouble, SendOnceEmailQueue

# Who a non-production stage may email: SES's mailbox simulator (success@, bounce@, complaint@ ...) and the team.
STAGING_RECIPIENTS = [SES_MAILBOX_SIMULATOR, "qa.example.com"]
# The shops known at deploy time, as SES tenants with the pipeline's identity and configuration set associated.
SHOPS = ["northwind", "contoso"]


class ReceiptsStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)
        staging = self.node.try_get_context("stage") == "staging"
        # The SES identity to send from (`-c sender=example.org`, or an address): verified in the account first.
        sender = str(self.node.try_get_context("sender") or "example.com")

        receipts = SendOnceEmailQueue(
            self,
            "Receipts",
            sender=sender,
            from_addresses=[sender if "@" in sender else f"receipts@{sender}"],
            function_timeout=cdk.Duration.seconds(int(self.node.try_get_context("functionTimeoutSeconds") or 30)),
            max_concurrency=5,
            # This pipeline's share of the account's SES rate (14 emails/s for many new production accounts).
            send_rate=float(self.node.try_get_context("sendRate") or 14),
            outbox=True,
            evidence_grace_period=cdk.Duration.seconds(int(self.node.try_get_context("evidenceGraceSeconds") or 300)),
            allowed_recipients=STAGING_RECIPIENTS if staging else None,
            # Invoices too large for the job body go to this bucket as claim checks (the producer uploads them).
            attachments_bucket=True,
            # Password resets (`priority="urgent"`) get a queue and consumer of their own and a fifth of send_rate,
            # lent to receipts while none wait: a flood of receipts never holds a reset back.
            urgent_lane=True,
            # A reset link or a one-time code met more than 15 minutes after it was enqueued (a backlog, an SES
            # stop, a redrive) is not sent: recorded EXPIRED and published, as the customer has asked again by then.
            urgent_max_job_age=cdk.Duration.minutes(15),
            # A producer that keys jobs wrongly (an SQS message id, a timestamp) turns every retry into a new email:
            # the same receipt to the same customer under another key within the hour is held in the DLQ, unsent.
            suspected_doubles=OnSuspectedDouble.HOLD,
            # The shops this platform sends for: each job's `tenant` is its SQS MessageGroupId (fair queues) and
            # SES's TenantName (each shop's reputation kept apart).
            ses_tenants=True,
        )
        for shop in SHOPS:
            receipts.add_ses_tenant(shop)

        checkout = iam.Role(self, "CheckoutService", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
        receipts.grant_enqueue(checkout)
        receipts.grant_outbox_write(checkout)
        receipts.grant_status_read(checkout)
        receipts.grant_attach(checkout)

        # The app hears which receipts bounced or drew a complaint (e.g. to flag the address on the account).
        unreadable = sqs.Queue(self, "UndeliverableReceiptsDlq", enforce_ssl=True,
                               retention_period=cdk.Duration.days(14))
        cdk.Validations.of(unreadable).acknowledge(cdk.Acknowledgment(
            id="Serverless-SQSRedrivePolicy", reason="It is the dead-letter queue: a queue behind it would hide them."))
        undeliverable = sqs.Queue(self, "UndeliverableReceipts", enforce_ssl=True,
                                  dead_letter_queue=sqs.DeadLetterQueue(queue=unreadable, max_receive_count=5))
        receipts.on_outcome("Undeliverable", targets.SqsQueue(undeliverable, dead_letter_queue=unreadable),
                            outcomes=["bounced", "complained"])
        cdk.CfnOutput(self, "UndeliverableReceiptsUrl", value=undeliverable.queue_url)


def build_app(context: dict[str, str] | None = None) -> cdk.App:
    app = cdk.App(context=context)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    env = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT") and os.environ.get("CDK_DEFAULT_REGION"):
        env = cdk.Environment(account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ["CDK_DEFAULT_REGION"])
    ReceiptsStack(app, "SendOnceExample", env=env)
    return app


if __name__ == "__main__":
    build_app().synth()
