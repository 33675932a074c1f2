"""sendonce: an AWS CDK construct for SQS-driven transactional email that sends each email once.

The construct classes load aws-cdk-lib on first use, so ``sendonce_constructs.local`` (the emulator and the
local runner) imports without starting jsii.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sendonce_contract.allowed_recipients import MAILBOX_SIMULATOR as SES_MAILBOX_SIMULATOR
from sendonce_contract.delivery import DeliveryPolicy

if TYPE_CHECKING:
    from .email_queue import SendOnceEmailQueue
    from .errors import SendOnceConfigurationError
    from .queue_props import SendOnceEmailQueueProps

__all__ = [
    "SES_MAILBOX_SIMULATOR",
    "DeliveryPolicy",
    "SendOnceConfigurationError",
    "SendOnceEmailQueue",
    "SendOnceEmailQueueProps",
]
_HOMES = {
    "SendOnceConfigurationError": ".errors",
    "SendOnceEmailQueue": ".email_queue",
    "SendOnceEmailQueueProps": ".queue_props",
}


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
