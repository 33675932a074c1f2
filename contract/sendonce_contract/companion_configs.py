"""The environments of the bundled functions beside the consumer: the SES event recorder, the outbox relay, the
outcome publisher and the quota watch, one typed config each, declared as the consumer's is (each field names its
variable and codec: :mod:`sendonce_contract.env_settings`; the names are :mod:`sendonce_contract.deploy_config`'s);
kept apart so that the consumer's cold start does not build them. The schedule watch's is the waiting room's
(:mod:`sendonce_contract.waiting_room`).
"""

# No postponed annotations here: env_settings reads the configs' field declarations at run time.
import os
from collections.abc import Mapping
from typing import Annotated, NamedTuple, Self

from .deploy_config import Env
from .env_settings import FLAG, TEXT, Var, from_env, to_env


class RecorderConfig(NamedTuple):
    """The SES event recorder's (``sendonce_runtime.event_recorder.handler``) environment."""

    table_name: Annotated[str, Var(Env.TABLE_NAME, TEXT, required=True)]
    dead_letter_queue_url: Annotated[str, Var(Env.EVIDENCE_DLQ_URL, TEXT, required=True)]
    pipeline_tag: Annotated[str | None, Var(Env.PIPELINE_TAG, TEXT)] = None
    pipeline_name: Annotated[str | None, Var(Env.PIPELINE_NAME, TEXT)] = None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)


class RelayConfig(NamedTuple):
    """The outbox relay's (``sendonce_runtime.outbox_relay.handler``) environment."""

    queue_url: Annotated[str, Var(Env.QUEUE_URL, TEXT, required=True)]
    fifo: Annotated[bool, Var(Env.FIFO, FLAG)] = False
    # With urgent_lane: where urgent jobs go.
    urgent_queue_url: Annotated[str | None, Var(Env.URGENT_QUEUE_URL, TEXT)] = None
    # key_privacy: a job's tenant travels as its digest under this secret.
    key_secret_id: Annotated[str | None, Var(Env.KEY_SECRET_ARN, TEXT)] = None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)


DEFAULT_BUS = "default"


class PublisherConfig(NamedTuple):
    """The outcome publisher's (``sendonce_runtime.outcome_publisher.handler``) environment."""

    bus: Annotated[str, Var(Env.OUTCOME_BUS, TEXT)]  # the event bus name or ARN (unset: the default bus)
    pipeline_tag: Annotated[str, Var(Env.PIPELINE_TAG, TEXT, required=True)]  # what an on_outcome rule matches
    pipeline_name: Annotated[str | None, Var(Env.PIPELINE_NAME, TEXT)] = None  # the metrics' Pipeline dimension

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, {**env, Env.OUTCOME_BUS: env.get(Env.OUTCOME_BUS) or DEFAULT_BUS})


class QuotaWatchConfig(NamedTuple):
    """The quota watch's (``sendonce_runtime.quota_watch.handler``) environment."""

    # The metric's Pipeline dimension; no metric without it.
    pipeline_name: Annotated[str | None, Var(Env.PIPELINE_NAME, TEXT)] = None

    def to_env(self) -> dict[str, str]:
        return to_env(self)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return from_env(cls, env)
