"""The consumer reads what the construct sets, and refuses to guess when the environment is incomplete."""

from __future__ import annotations

import pytest

from sendonce_contract.allowed_recipients import parse_entries
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_contract.deploy_config import Env
from sendonce_runtime.settings import Settings, SettingsError, TimeBudget


def test_settings_come_from_the_constructs_environment():
    settings = Settings.from_env({
        Env.TABLE_NAME: "t", Env.DLQ_URL: "u", Env.DELIVERY: "resend-without-evidence",
        Env.DEDUPE_TTL_SECONDS: "60", Env.PARALLELISM: "4", Env.FIFO: "true",
        Env.CONFIGURATION_SET: "cs", Env.SES_CONNECT_TIMEOUT_S: "0.5",
        Env.SES_READ_TIMEOUT_S: "1", Env.LEDGER_BUDGET_MS: "500", Env.LEASE_MARGIN_MS: "6000",
        Env.PIPELINE_NAME: "Shop/Receipts",
    })
    assert settings == Settings(
        table_name="t", dead_letter_queue_url="u", delivery=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, dedupe_ttl_s=60,
        parallelism=4, fifo=True, configuration_set="cs", pipeline_name="Shop/Receipts",
        time_budget=TimeBudget(lease_margin_ms=6000, ses_connect_timeout_s=0.5, ses_read_timeout_s=1.0,
                               ledger_budget_ms=500),
    )
    assert settings.budget.record_budget_ms == 2000


def test_missing_table_or_dlq_is_a_deployment_error():
    with pytest.raises(SettingsError, match=f"{Env.TABLE_NAME}, {Env.DLQ_URL} are not set"):
        Settings.from_env({})


def test_an_unknown_policy_is_refused():
    with pytest.raises(SettingsError, match="invalid sendonce setting"):
        Settings.from_env({Env.TABLE_NAME: "t", Env.DLQ_URL: "u", Env.DELIVERY: "maybe"})


def test_key_privacy_and_allowed_recipients_come_from_the_environment():
    base = {Env.TABLE_NAME: "t", Env.DLQ_URL: "u"}
    settings = Settings.from_env({**base, Env.KEY_SECRET_ARN: "arn:secret",
                                  Env.ALLOWED_RECIPIENTS: "qa@example.com simulator.amazonses.com"})
    assert settings.key_secret_id == "arn:secret"
    assert settings.allowed_recipients == parse_entries(["qa@example.com", "simulator.amazonses.com"])
    production = Settings.from_env(base)
    assert production.key_secret_id is None and production.allowed_recipients is None
    with pytest.raises(SettingsError, match="invalid sendonce setting: 'qa@' is not an address"):
        Settings.from_env({**base, Env.ALLOWED_RECIPIENTS: "qa@"})
