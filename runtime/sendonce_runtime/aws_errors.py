"""What an AWS error says about the call that raised it: whether the request may have been carried out, and
whether DynamoDB's trouble is worth waiting out.

A call whose answer was lost (a read timeout, a dropped connection, a 5xx) may have been carried out: its caller
treats it as possibly done, never as failed. Only a connection that never opened, or a 4xx answer, says the
request was not carried out.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError

from .outcome import Outcome

# DynamoDB's throttling errors (on-demand tables throttle a burst beyond twice their previous peak).
LEDGER_THROTTLE_CODES = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "LimitExceededException", "TransactionConflictException",
})
# What a DynamoDB (or any AWS) call raises when it fails.
LEDGER_ERRORS = (ClientError, BotoCoreError)


def status_code(error: ClientError) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def never_sent(error: BaseException) -> bool:
    """True when the request surely was not carried out: the connection never opened, or AWS answered 4xx."""
    if isinstance(error, (ConnectTimeoutError, EndpointConnectionError)):
        return True
    if isinstance(error, ClientError):
        return 0 < status_code(error) < 500
    return False


def ledger_trouble(error: BaseException) -> Outcome | None:
    """``LEDGER_THROTTLED`` or ``LEDGER_UNAVAILABLE`` for DynamoDB trouble a job should wait out (throttling,
    timeouts, 5xx, connections); None for a real failure (access denied, a bad request, a missing table)."""
    if isinstance(error, ClientError):
        if error_code(error) in LEDGER_THROTTLE_CODES or status_code(error) == 429:
            return Outcome.LEDGER_THROTTLED
        return Outcome.LEDGER_UNAVAILABLE if status_code(error) >= 500 or status_code(error) == 0 else None
    return Outcome.LEDGER_UNAVAILABLE if isinstance(error, BotoCoreError) else None


def ledger_outcome(error: BaseException) -> Outcome:
    """The outcome DynamoDB's trouble makes of a record: a wait (throttled or unavailable) or a real failure."""
    return ledger_trouble(error) or Outcome.LEDGER_FAILED


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
