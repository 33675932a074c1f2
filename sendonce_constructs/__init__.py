"""sendonce: an AWS CDK construct for SQS-driven transactional email that sends each email once."""

from .delivery import DeliveryPolicy
from .email_queue import SendOnceEmailQueue
from .errors import SendOnceConfigurationError

__all__ = ["DeliveryPolicy", "SendOnceConfigurationError", "SendOnceEmailQueue"]
