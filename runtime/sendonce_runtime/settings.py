"""The consumer's settings, read once from the environment the construct sets."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from sendonce_contract import allowed_recipients as allowed
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.schema import DEFAULT_DEDUPE_TTL_S

# The most calls besides the send one record makes in a row: claim, release after a refusal, dead-letter send.
LEDGER_CALLS_PER_RECORD = 3


class SettingsError(RuntimeError):
    """The function's environment is incomplete: a deployment error, not a message error."""


@dataclass(frozen=True)
class Settings:
    table_name: str
    dead_letter_queue_url: str
    delivery: DeliveryPolicy = DeliveryPolicy.RESEND_WITHOUT_EVIDENCE
    dedupe_ttl_s: int = DEFAULT_DEDUPE_TTL_S
    parallelism: int = 1
    fifo: bool = False
    configuration_set: str | None = None
    pipeline_name: str | None = None  # the metrics' Pipeline dimension; no metrics without it
    max_send_rate: float | None = None  # recipients a second per execution environment; None for no limit
    # A lease outlives the invocation by this much, so it expires only once its worker is surely dead.
    lease_margin_ms: int = 10_000
    ses_connect_timeout_s: float = 2.0
    ses_read_timeout_s: float = 5.0
    # What a claim and the completion write need on top of the send, when deciding whether to start a record.
    ledger_budget_ms: int = 6_000
    # SES's events are the evidence (None: events are off). A send whose worker died is decided this long after
    # its lease expired: by SES's events if any came, by the delivery policy if none did.
    evidence_grace_ms: int | None = None
    pipeline_tag: str | None = None  # tags every email, so the pipeline's event rule matches its events only
    queue_url: str | None = None  # the job queue: a delayed copy of a throttled job, an earlier redelivery
    max_receive_count: int | None = None  # the queue's; the last receive dead-letters a failure with its reason
    outcome_bus: str | None = None  # where Email Dead-Lettered events go (None: outcome events are off)
    key_secret_id: str | None = None  # key_privacy: the secret whose HMAC of each key stands for it
    allowed_recipients: allowed.AllowedRecipients | None = None  # a stage's only recipients; None allows all

    @property
    def ledger_call_timeouts_s(self) -> tuple[float, float]:
        """(connect, read) for one ledger or DLQ call, with no SDK retry: the calls a record makes besides the send
        (a claim, then a completion, or a release and a dead-letter send) all fit ``ledger_budget_ms``."""
        per_call_s = self.ledger_budget_ms / 1000 / LEDGER_CALLS_PER_RECORD
        # Connecting gets the larger share: at 30 s it outlasts one lost SYN (Linux retransmits after 1 s), while
        # DynamoDB answers a write in milliseconds.
        return per_call_s * 0.6, per_call_s * 0.4

    @property
    def record_budget_ms(self) -> int:
        """The least time a record needs: a claim, a send that may run to its timeouts, and a completion."""
        return int((self.ses_connect_timeout_s + self.ses_read_timeout_s) * 1000) + self.ledger_budget_ms

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        missing = [n for n in ("SENDONCE_TABLE_NAME", "SENDONCE_DLQ_URL") if not env.get(n)]
        if missing:
            raise SettingsError(f"environment variables {', '.join(missing)} are not set; deploy with the construct")
        try:
            return cls(
                table_name=env["SENDONCE_TABLE_NAME"],
                dead_letter_queue_url=env["SENDONCE_DLQ_URL"],
                delivery=DeliveryPolicy(env.get("SENDONCE_DELIVERY", cls.delivery.value)),
                dedupe_ttl_s=int(env.get("SENDONCE_DEDUPE_TTL_SECONDS", cls.dedupe_ttl_s)),
                parallelism=max(1, int(env.get("SENDONCE_PARALLELISM", cls.parallelism))),
                fifo=env.get("SENDONCE_FIFO", "false").lower() == "true",
                configuration_set=env.get("SENDONCE_CONFIGURATION_SET") or None,
                pipeline_name=env.get("SENDONCE_PIPELINE_NAME") or None,
                max_send_rate=float(env["SENDONCE_MAX_SEND_RATE"]) if env.get("SENDONCE_MAX_SEND_RATE") else None,
                lease_margin_ms=int(env.get("SENDONCE_LEASE_MARGIN_MS", cls.lease_margin_ms)),
                ses_connect_timeout_s=float(env.get("SENDONCE_SES_CONNECT_TIMEOUT_S", cls.ses_connect_timeout_s)),
                ses_read_timeout_s=float(env.get("SENDONCE_SES_READ_TIMEOUT_S", cls.ses_read_timeout_s)),
                ledger_budget_ms=int(env.get("SENDONCE_LEDGER_BUDGET_MS", cls.ledger_budget_ms)),
                evidence_grace_ms=int(env["SENDONCE_EVIDENCE_GRACE_MS"]) if env.get("SENDONCE_EVIDENCE_GRACE_MS")
                else None,
                pipeline_tag=env.get("SENDONCE_PIPELINE_TAG") or None,
                queue_url=env.get("SENDONCE_QUEUE_URL") or None,
                max_receive_count=int(env["SENDONCE_MAX_RECEIVE_COUNT"]) if env.get("SENDONCE_MAX_RECEIVE_COUNT")
                else None,
                outcome_bus=env.get("SENDONCE_OUTCOME_BUS") or None,
                key_secret_id=env.get("SENDONCE_KEY_SECRET_ARN") or None,
                allowed_recipients=allowed.from_env(env.get("SENDONCE_ALLOWED_RECIPIENTS")),
            )
        except ValueError as error:
            raise SettingsError(f"invalid sendonce setting: {error}") from error
