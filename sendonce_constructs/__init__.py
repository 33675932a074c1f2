"""sendonce: an AWS CDK construct for SQS-driven transactional email that sends each email once.

The operator command (``sendonce_ops``) and the local tooling (``sendonce_local``) are packages of their own: this
one is the construct only, and importing it loads aws-cdk-lib.
"""

from sendonce_contract.allowed_recipients import MAILBOX_SIMULATOR as SES_MAILBOX_SIMULATOR
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.mis_keyed import OnSuspectedDouble
from sendonce_contract.ses_tenant_settings import (
    ReputationPolicy,
    SuppressionReason,
    SuppressionScope,
    TenantSuppression,
)

from .email_queue import SendOnceEmailQueue
from .errors import SendOnceConfigurationError
from .queue_props import SendOnceEmailQueueProps

__all__ = [
    "SES_MAILBOX_SIMULATOR",
    "DeliveryPolicy",
    "OnSuspectedDouble",
    "ReputationPolicy",
    "SendOnceConfigurationError",
    "SendOnceEmailQueue",
    "SendOnceEmailQueueProps",
    "SuppressionReason",
    "SuppressionScope",
    "TenantSuppression",
]
