"""The consumer's settings: the contract's consumer config, read once from the environment the construct sets."""

from __future__ import annotations

from sendonce_contract.deploy_config import LEDGER_CALLS_PER_RECORD, ConsumerConfig, TimeBudget
from sendonce_contract.env_settings import ConfigError

Settings = ConsumerConfig
SettingsError = ConfigError

__all__ = ["LEDGER_CALLS_PER_RECORD", "Settings", "SettingsError", "TimeBudget"]
