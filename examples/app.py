"""An app with one SendOnceEmailQueue: `npx cdk synth` or `npx cdk deploy` from the repository root."""

import os

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks, ServerlessChecks
from constructs import Construct

from sendonce_constructs import SendOnceEmailQueue


class ReceiptsStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)

        receipts = SendOnceEmailQueue(
            self,
            "Receipts",
            sender="example.com",
            from_addresses=["receipts@example.com"],
            function_timeout=cdk.Duration.seconds(int(self.node.try_get_context("functionTimeoutSeconds") or 30)),
            max_concurrency=5,
            # This pipeline's share of the account's SES rate (14 emails/s for many new production accounts).
            send_rate=float(self.node.try_get_context("sendRate") or 14),
            outbox=True,
            evidence_grace_period=cdk.Duration.seconds(int(self.node.try_get_context("evidenceGraceSeconds") or 300)),
        )

        checkout = iam.Role(self, "CheckoutService", assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"))
        receipts.grant_enqueue(checkout)
        receipts.grant_outbox_write(checkout)


def build_app() -> cdk.App:
    app = cdk.App()
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    env = None
    if os.environ.get("CDK_DEFAULT_ACCOUNT") and os.environ.get("CDK_DEFAULT_REGION"):
        env = cdk.Environment(account=os.environ["CDK_DEFAULT_ACCOUNT"], region=os.environ["CDK_DEFAULT_REGION"])
    ReceiptsStack(app, "SendOnceExample", env=env)
    return app


if __name__ == "__main__":
    build_app().synth()
