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


def test_every_consumer_setting_declares_its_variable_and_codec_and_no_two_share_a_variable():
    from sendonce_contract.deploy_config import PROP_FIELDS, ConsumerConfig
    from sendonce_contract.env_settings import Nested, Var, settings

    declared = dict(settings(ConsumerConfig))
    assert list(declared) == list(ConsumerConfig._fields), "each field declares its variable and codec"
    names = [d.name for d in declared.values() if isinstance(d, Var)]
    names += [d.name for _, d in settings(TimeBudget) if isinstance(d, Var)]
    assert len(names) == len(set(names)), "no two settings share a variable"
    assert any(isinstance(d, Nested) for d in declared.values())
    assert set(PROP_FIELDS) <= set(ConsumerConfig._fields)


def test_an_off_switch_is_said_by_absence_and_an_empty_allow_list_is_not_read_as_none():
    from sendonce_contract.env_settings import ConfigError

    written = Settings(table_name="t", dead_letter_queue_url="u").to_env()
    assert Env.SES_TENANTS not in written and Env.TENANT_METRICS not in written and written[Env.FIFO] == "false"
    assert Env.EVIDENCE_GRACE_MS not in written and not Settings.from_env(written).ses_events
    on = Settings(table_name="t", dead_letter_queue_url="u", ses_tenants=True, evidence_grace_ms=0)
    assert Settings.from_env(on.to_env()) == on and Settings.from_env(on.to_env()).ses_events
    # An empty list must refuse every recipient, never fall back to allowing all.
    empty = Settings.from_env({Env.TABLE_NAME: "t", Env.DLQ_URL: "u", Env.ALLOWED_RECIPIENTS: ""})
    assert empty.allowed_recipients is not None
    with pytest.raises(ConfigError, match=f"in {Env.ALLOWED_RECIPIENTS}='not an address'"):
        Settings.from_env({Env.TABLE_NAME: "t", Env.DLQ_URL: "u", Env.ALLOWED_RECIPIENTS: "not an address"})
