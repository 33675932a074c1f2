"""The consumer reads what the construct sets, and refuses to guess when the environment is incomplete."""

from __future__ import annotations

import pytest

from sendonce_contract.allowed_recipients import parse_entries
from sendonce_contract.delivery import DeliveryPolicy
from sendonce_runtime.settings import Settings, SettingsError, TimeBudget


def test_settings_come_from_the_constructs_environment():
    settings = Settings.from_env({
        "SENDONCE_TABLE_NAME": "t", "SENDONCE_DLQ_URL": "u", "SENDONCE_DELIVERY": "resend-without-evidence",
        "SENDONCE_DEDUPE_TTL_SECONDS": "60", "SENDONCE_PARALLELISM": "4", "SENDONCE_FIFO": "true",
        "SENDONCE_CONFIGURATION_SET": "cs", "SENDONCE_SES_CONNECT_TIMEOUT_S": "0.5",
        "SENDONCE_SES_READ_TIMEOUT_S": "1", "SENDONCE_LEDGER_BUDGET_MS": "500", "SENDONCE_LEASE_MARGIN_MS": "6000",
        "SENDONCE_PIPELINE_NAME": "Shop/Receipts",
    })
    assert settings == Settings(
        table_name="t", dead_letter_queue_url="u", delivery=DeliveryPolicy.RESEND_WITHOUT_EVIDENCE, dedupe_ttl_s=60,
        parallelism=4, fifo=True, configuration_set="cs", pipeline_name="Shop/Receipts",
        time_budget=TimeBudget(lease_margin_ms=6000, ses_connect_timeout_s=0.5, ses_read_timeout_s=1.0,
                               ledger_budget_ms=500),
    )
    assert settings.budget.record_budget_ms == 2000


def test_missing_table_or_dlq_is_a_deployment_error():
    with pytest.raises(SettingsError, match="SENDONCE_TABLE_NAME, SENDONCE_DLQ_URL are not set"):
        Settings.from_env({})


def test_an_unknown_policy_is_refused():
    with pytest.raises(SettingsError, match="invalid sendonce setting"):
        Settings.from_env({"SENDONCE_TABLE_NAME": "t", "SENDONCE_DLQ_URL": "u", "SENDONCE_DELIVERY": "maybe"})


def test_key_privacy_and_allowed_recipients_come_from_the_environment():
    base = {"SENDONCE_TABLE_NAME": "t", "SENDONCE_DLQ_URL": "u"}
    settings = Settings.from_env({**base, "SENDONCE_KEY_SECRET_ARN": "arn:secret",
                                  "SENDONCE_ALLOWED_RECIPIENTS": "qa@example.com simulator.amazonses.com"})
    assert settings.key_secret_id == "arn:secret"
    assert settings.allowed_recipients == parse_entries(["qa@example.com", "simulator.amazonses.com"])
    production = Settings.from_env(base)
    assert production.key_secret_id is None and production.allowed_recipients is None
    with pytest.raises(SettingsError, match="invalid sendonce setting: 'qa@' is not an address"):
        Settings.from_env({**base, "SENDONCE_ALLOWED_RECIPIENTS": "qa@"})
