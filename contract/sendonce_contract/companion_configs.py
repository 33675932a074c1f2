"""The environments of the bundled functions beside the consumer: the SES event recorder, the outbox relay, the
outcome publisher and the quota watch, one typed config each (see :mod:`sendonce_contract.deploy_config`, whose
names they use; kept apart so that the consumer's cold start does not build them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple, Self

from .deploy_config import Env
from .env_settings import flag, put, read_flag, require


class RecorderConfig(NamedTuple):
    """The SES event recorder's (``sendonce_runtime.event_recorder.handler``) environment."""

    table_name: str
    dead_letter_queue_url: str
    pipeline_tag: str | None = None
    pipeline_name: str | None = None

    def to_env(self) -> dict[str, str]:
        env = {Env.TABLE_NAME: self.table_name, Env.EVIDENCE_DLQ_URL: self.dead_letter_queue_url}
        put(env, Env.PIPELINE_TAG, self.pipeline_tag)
        put(env, Env.PIPELINE_NAME, self.pipeline_name)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        require(env, Env.TABLE_NAME, Env.EVIDENCE_DLQ_URL)
        return cls(env[Env.TABLE_NAME], env[Env.EVIDENCE_DLQ_URL], env.get(Env.PIPELINE_TAG) or None,
                   env.get(Env.PIPELINE_NAME) or None)


class RelayConfig(NamedTuple):
    """The outbox relay's (``sendonce_runtime.outbox_relay.handler``) environment."""

    queue_url: str
    fifo: bool = False
    urgent_queue_url: str | None = None  # with urgent_lane: where urgent jobs go
    key_secret_id: str | None = None  # key_privacy: a job's tenant travels as its digest under this secret

    def to_env(self) -> dict[str, str]:
        env = {Env.QUEUE_URL: self.queue_url, Env.FIFO: flag(self.fifo)}
        put(env, Env.URGENT_QUEUE_URL, self.urgent_queue_url)
        put(env, Env.KEY_SECRET_ARN, self.key_secret_id)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        require(env, Env.QUEUE_URL)
        return cls(env[Env.QUEUE_URL], read_flag(env, Env.FIFO), env.get(Env.URGENT_QUEUE_URL) or None,
                   env.get(Env.KEY_SECRET_ARN) or None)


class PublisherConfig(NamedTuple):
    """The outcome publisher's (``sendonce_runtime.outcome_publisher.handler``) environment."""

    bus: str  # the event bus name or ARN
    pipeline_tag: str  # the detail's "pipeline": what an on_outcome rule matches
    pipeline_name: str | None = None  # the metrics' Pipeline dimension

    def to_env(self) -> dict[str, str]:
        env = {Env.OUTCOME_BUS: self.bus, Env.PIPELINE_TAG: self.pipeline_tag}
        put(env, Env.PIPELINE_NAME, self.pipeline_name)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        require(env, Env.PIPELINE_TAG)
        return cls(env.get(Env.OUTCOME_BUS) or "default", env[Env.PIPELINE_TAG], env.get(Env.PIPELINE_NAME) or None)


class QuotaWatchConfig(NamedTuple):
    """The quota watch's (``sendonce_runtime.quota_watch.handler``) environment."""

    pipeline_name: str | None = None  # the metric's Pipeline dimension; no metric without it

    def to_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        put(env, Env.PIPELINE_NAME, self.pipeline_name)
        return env

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Self:
        return cls(env.get(Env.PIPELINE_NAME) or None)
