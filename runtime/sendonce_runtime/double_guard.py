"""The mis-keyed-producer guard, one check before the claim (docs: choosing a key; the settings and limits are
:mod:`sendonce_contract.mis_keyed`'s). Only pipelines that turn it on import this module.

- **Suspected doubles**: the job's recipients and content (sender, subject and bodies, template and data, or raw
  MIME, attachments, tenant) as one digest, whose item in the dedupe table names the first key that sent them in
  the window. Another key sending the same within it is added to the item's suspects, once: counted
  (``SuspectedDoubles``), published by the outcome stream (``Email Suspected Double``), and sent (``flag``) or held
  in the DLQ (``hold``, reason ``suspected-double``).
- **A cap per recipient**: each recipient's item for the window (fixed windows, as the epoch divides them) counts
  the keys sent to it; a job that would take any recipient over the cap is held in the DLQ (``recipient-cap``), and
  counts nowhere.

Every write is conditional and idempotent per key, so a redelivery, a copy or a put-back of the same job counts
once and is never its own double. Recipients and content are digests only: keyed (the key secret's HMAC) under
``key_privacy``. A job an operator's redrive sent back from one of these holds passes unchecked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from botocore.exceptions import ClientError

from sendonce_contract.message import ParsedJob, RawContent, SimpleContent
from sendonce_contract.mis_keyed import (
    COUNTED_KEY_CHARS,
    DEFAULT_GUARD_WINDOW_S,
    GUARD_ITEM_MARGIN_S,
    OnSuspectedDouble,
)
from sendonce_contract.schema import GuardItem

from .aws_errors import LEDGER_ERRORS, LEDGER_THROTTLE_CODES, describe, error_code, ledger_outcome
from .checks import Delivery, Rest
from .clock import Clock
from .dynamodb_values import condition_failed, found_item
from .outcome import Outcome, Redeliver, Verdict, amended
from .settings import Settings

# The calls the guard may make for one record before its claim: the content item, its suspects, the recipients.
GUARD_CALLS = 3


class MisKeyedGuard:
    def __init__(self, settings: Settings, client: Any, clock: Clock, keyed: Callable[[str], str],
                 tenant_of: Callable[[ParsedJob], str | None]) -> None:
        self._client = client
        self._table = settings.table_name
        self._pipeline = settings.pipeline_name
        self._doubles = settings.suspected_doubles
        self._cap = settings.recipient_cap
        self._window_ms = (settings.guard_window_s or DEFAULT_GUARD_WINDOW_S) * 1000
        self._clock = clock
        self._keyed = keyed  # the key secret's HMAC under key_privacy, else the text itself
        self._tenant_of = tenant_of
        # The guard's calls and then the whole record must fit before the deadline.
        self._needs_ms = settings.budget.record_budget_ms + GUARD_CALLS * settings.budget.ledger_call_ms

    def __call__(self, delivery: Delivery, rest: Rest) -> Verdict:
        if delivery.record.released is not None:
            return rest(delivery)  # an operator redrove it from the guard's hold
        if delivery.deadline.remaining_ms() < self._needs_ms:
            return Redeliver(delivery.result(Outcome.DEADLINE, "too little time left to check and send"),
                             retry_after_s=0)
        job = delivery.job
        recipients = sorted({mailbox.address.lower() for mailbox in (*job.to, *job.cc, *job.bcc)})
        now_ms = self._clock.now_ms()
        try:
            first_key = None
            if self._doubles is not None:
                first_key = self._first_key(job, recipients, now_ms)
                if first_key is not None and self._doubles is OnSuspectedDouble.HOLD:
                    return delivery.refuse(Outcome.SUSPECTED_DOUBLE, _held_double_reason(first_key))
            if self._cap is not None:
                capped = self._count(job.dedupe_key, recipients, now_ms)
                if capped:
                    return delivery.refuse(Outcome.RECIPIENT_CAPPED, capped)
        except _Contended as error:
            return Redeliver(delivery.result(Outcome.LEDGER_THROTTLED, str(error)))
        except LEDGER_ERRORS as error:
            return Redeliver(delivery.result(ledger_outcome(error), describe(error)))
        verdict = rest(delivery)
        return verdict if first_key is None else amended(verdict, suspected_double_of=first_key)

    def _digest(self, text: str) -> str:
        return hashlib.sha256(self._keyed(text).encode()).hexdigest()

    def _first_key(self, job: ParsedJob, recipients: Sequence[str], now_ms: int) -> str | None:
        """The key that first sent this job's content to its recipients in the window, when it is another key and
        this is the first time the guard sees this key do it; else None."""
        item_key = {GuardItem.KEY: {"S": GuardItem.content_key(self._pipeline,
                                                               self._digest(_content_text(job, recipients)))}}
        tenant = self._tenant_of(job)
        ends_at_ms = now_ms + self._window_ms
        item = {**item_key, GuardItem.KIND: {"S": GuardItem.CONTENT}, GuardItem.FIRST_KEY: {"S": job.dedupe_key},
                GuardItem.WINDOW_ENDS_AT: {"N": str(ends_at_ms)},
                GuardItem.EXPIRES_AT: {"N": str(ends_at_ms // 1000 + GUARD_ITEM_MARGIN_S)},
                **({GuardItem.TENANT: {"S": tenant}} if tenant is not None else {})}
        old = _unless_condition_failed(lambda: self._client.put_item(
            TableName=self._table, Item=item, ReturnValuesOnConditionCheckFailure="ALL_OLD",
            ConditionExpression=f"attribute_not_exists({GuardItem.KEY}) OR {GuardItem.WINDOW_ENDS_AT} < :now",
            ExpressionAttributeValues={":now": {"N": str(now_ms)}}))
        if old is None or old[GuardItem.FIRST_KEY]["S"] == job.dedupe_key:
            return None  # the first key in the window, or this same key again
        first_key = str(old[GuardItem.FIRST_KEY]["S"])
        # Once per key: a redelivery of a suspect is not a new double.
        again = _unless_condition_failed(lambda: self._client.update_item(
            TableName=self._table, Key=item_key, ReturnValuesOnConditionCheckFailure="ALL_OLD",
            UpdateExpression=f"ADD {GuardItem.SUSPECTS} :key SET {GuardItem.LAST_SUSPECT_AT} = :now",
            ConditionExpression=f"{GuardItem.FIRST_KEY} = :first AND NOT contains({GuardItem.SUSPECTS}, :one)",
            ExpressionAttributeValues={":key": {"SS": [job.dedupe_key]}, ":one": {"S": job.dedupe_key},
                                       ":first": {"S": first_key}, ":now": {"N": str(now_ms)}}))
        if again is not None and again.get(GuardItem.FIRST_KEY, {}).get("S") != first_key:
            raise _Contended("the guard's content item changed under this worker (a new window began)")
        return first_key if again is None or self._doubles is OnSuspectedDouble.HOLD else None

    def _count(self, key: str, recipients: Sequence[str], now_ms: int) -> str | None:
        """Count ``key`` for each recipient in the current window, all or none; the reason when it would take a
        recipient over the cap (nothing counted then)."""
        assert self._cap is not None
        window = now_ms // self._window_ms
        ends_at_s = (window + 1) * self._window_ms // 1000
        counted = hashlib.sha256(key.encode()).hexdigest()[:COUNTED_KEY_CHARS]
        updates = [{
            "TableName": self._table,
            "Key": {GuardItem.KEY: {"S": GuardItem.recipient_key(self._pipeline, self._digest(recipient), window)}},
            # "keys" is one of DynamoDB's reserved words: every name goes through a placeholder.
            "UpdateExpression": "ADD #keys :key SET #kind = :kind, #expires = :expires",
            "ConditionExpression": "attribute_not_exists(#keys) OR contains(#keys, :one) OR size(#keys) < :cap",
            "ExpressionAttributeNames": {"#keys": GuardItem.KEYS, "#kind": GuardItem.KIND,
                                         "#expires": GuardItem.EXPIRES_AT},
            "ExpressionAttributeValues": {":key": {"SS": [counted]}, ":one": {"S": counted},
                                          ":cap": {"N": str(self._cap)}, ":kind": {"S": GuardItem.RECIPIENT},
                                          ":expires": {"N": str(ends_at_s + GUARD_ITEM_MARGIN_S)}},
        } for recipient in recipients]
        over = f"a recipient already got {self._cap} emails of this pipeline in its {self._window_ms // 1000:,} s " \
               "window (recipient_cap): held unsent; find the loop or the mis-keyed producer, then redrive it"
        if len(updates) == 1:
            return None if _unless_condition_failed(lambda: self._client.update_item(**updates[0])) is None else over
        try:
            self._client.transact_write_items(TransactItems=[{"Update": update} for update in updates])
        except ClientError as error:
            if error_code(error) != "TransactionCanceledException":
                raise
            codes = {reason.get("Code") for reason in error.response.get("CancellationReasons", [])}
            if "ConditionalCheckFailed" in codes:
                return over
            if codes & ({"TransactionConflict", "ThrottlingError"} | LEDGER_THROTTLE_CODES):
                raise _Contended("the recipients' counts were busy (a transaction conflict or throttle)") from None
            raise
        return None


class _Contended(Exception):
    """Another writer or DynamoDB's throttling stood in the way: try again later, like any throttle."""


def _unless_condition_failed(write: Callable[[], Any]) -> dict[str, Any] | None:
    """None when ``write`` succeeded; the item that stood in its way when its condition failed."""
    try:
        write()
    except ClientError as error:
        if not condition_failed(error):
            raise
        return dict(found_item(error) or {})
    return None


def _content_text(job: ParsedJob, recipients: Sequence[str]) -> str:
    """What makes two jobs the same email to a person: the recipients, the sender, the content, the attachments and
    the tenant (not the key, the tags, the headers, sendAt or expiresAt)."""
    content = job.content
    if isinstance(content, SimpleContent):
        body: list[Any] = ["simple", content.subject, content.html, content.text]
    elif isinstance(content, RawContent):
        body = ["raw", hashlib.sha256(content.mime).hexdigest()]
    else:
        body = ["template", content.name, content.data_json]
    attachments = [[a.file_name, a.content_type, a.disposition,
                    hashlib.sha256(a.content).hexdigest() if a.content is not None else None,
                    [a.s3.bucket, a.s3.key] if a.s3 is not None else None] for a in job.attachments]
    return json.dumps([list(recipients), job.from_address.address.lower(), body, attachments, job.tenant],
                      separators=(",", ":"), ensure_ascii=False)


def _held_double_reason(first_key: str) -> str:
    return (f"its recipients got the same content under key {first_key!r} within the guard's window (a suspected "
            "double: a key that changes between attempts): held unsent; fix the producer's keys, then redrive it "
            "to send it")
