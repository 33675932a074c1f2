"""Each name that crosses a boundary is spelled in one module: every environment variable of a bundled function,
every metric, every SES event type and every ledger attribute. Every other module imports it, so no two parts can
spell one differently (the tests, which check what the parts write, may use the constants)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from layout import PACKAGES

from sendonce_contract import companion_configs, deploy_config, env_settings, schema
from sendonce_contract.deploy_config import ConsumerConfig, Env, TimeBudget
from sendonce_contract.schema import IGNORED_SES_EVENT_TYPES, SES_EVENT_TYPES, Ledger, Metric

ROOT = Path(__file__).resolve().parents[1]
SCANNED = (*(folder.relative_to(ROOT).as_posix() for folder in PACKAGES.values()), "bench", "integ")
DEPLOY_CONFIG = Path(deploy_config.__file__).resolve().relative_to(ROOT)
# The integration test's runner hands its app a few names of its own: repository tooling, spelled beside it.
INTEG_ENV = Path("integ/integ_env.py")
INTEG_NAME_PREFIX = "SENDONCE_INTEG_"
SCHEMA = Path(schema.__file__).resolve().relative_to(ROOT)

ENV_NAME = re.compile(r"SENDONCE_[A-Z0-9_]+")
# Plain words that mean something else where they are spelled: a Lambda event's "Records" key, the outcome events'
# construct id; a ledger record's "status", "owner" and "attempts", and the job's key field that raw test jobs spell.
METRIC_NAMES = {v for k, v in vars(Metric).items() if k.isupper()} - {"Records", "OutcomeEvents"}
SES_EVENT_NAMES = {e.name for e in SES_EVENT_TYPES} | IGNORED_SES_EVENT_TYPES
# SES's own field names, which the ledger keeps for what an event says: SES's events (and the local SES that plays
# them) spell them as SES does.
SES_FIELD_NAMES = {"bounceType", "bounceSubType", "complaintFeedbackType", "delayType"}
LEDGER_NAMES = ({v for k, v in vars(Ledger).items() if k.isupper()}
                - {Ledger.STATUS, Ledger.OWNER, Ledger.ATTEMPTS, Ledger.KEY} - SES_FIELD_NAMES)


def _literals(path: Path) -> list[str]:
    """String constants in ``path``, docstrings left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def _spellers() -> dict[str, set[Path]]:
    """Each name of interest, and the modules that spell it as a string literal."""
    found: dict[str, set[Path]] = defaultdict(set)
    exact = METRIC_NAMES | SES_EVENT_NAMES | LEDGER_NAMES
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if any(part.startswith(".") or part in ("node_modules", "build") for part in path.parts):
                continue
            relative = path.relative_to(ROOT)
            for text in _literals(path):
                for name in ENV_NAME.findall(text):
                    found[name].add(relative)
                if text in exact:
                    found[text].add(relative)
    return found


def test_every_environment_variable_is_spelled_in_the_deploy_config_only():
    spellers = _spellers()
    declared = {v for k, v in vars(Env).items() if k.isupper()}
    assert declared <= set(spellers)
    wrong = {name: sorted(map(str, paths)) for name, paths in spellers.items()
             if name.startswith("SENDONCE_") and paths != {INTEG_ENV if name.startswith(INTEG_NAME_PREFIX)
                                                            else DEPLOY_CONFIG}}
    assert wrong == {}, "import these names from sendonce_contract.deploy_config (integ/integ_env.py) instead"


def test_every_metric_ses_event_type_and_ledger_attribute_is_spelled_in_the_schema_only():
    spellers = _spellers()
    wrong = {name: sorted(map(str, spellers[name])) for name in sorted(METRIC_NAMES | SES_EVENT_NAMES | LEDGER_NAMES)
             if spellers[name] != {SCHEMA}}
    assert wrong == {}, "import these names from sendonce_contract.schema instead"


def test_each_config_reads_back_what_it_writes():
    config = ConsumerConfig(
        table_name="t", dead_letter_queue_url="d", parallelism=4, fifo=True, configuration_set="cs",
        pipeline_name="Shop/Receipts", max_send_rate=2.5, time_budget=TimeBudget.for_function_timeout(7),
        evidence_grace_ms=60_000, pipeline_tag="tag", queue_url="q", max_receive_count=5,
        outcome_bus="bus", key_secret_id="arn:secret",
    )
    assert ConsumerConfig.from_env(config.to_env()) == config
    for config_type in (companion_configs.RecorderConfig, companion_configs.PublisherConfig):
        other = config_type("a", "b", "Shop/Receipts")
        assert config_type.from_env(other.to_env()) == other
    relay = companion_configs.RelayConfig("q", fifo=True)
    assert companion_configs.RelayConfig.from_env(relay.to_env()) == relay
    watch = companion_configs.QuotaWatchConfig("Shop/Receipts")
    assert companion_configs.QuotaWatchConfig.from_env(watch.to_env()) == watch


def test_events_off_is_said_by_the_absence_of_a_grace_period_and_a_malformed_variable_is_named():
    import pytest

    config = ConsumerConfig.from_env({Env.TABLE_NAME: "t", Env.DLQ_URL: "d"})
    assert not config.ses_events and config.time_budget is None and config.budget == TimeBudget()
    with pytest.raises(env_settings.ConfigError, match=f"in {Env.PARALLELISM}='many'"):
        ConsumerConfig.from_env({Env.TABLE_NAME: "t", Env.DLQ_URL: "d", Env.PARALLELISM: "many"})
    with pytest.raises(env_settings.ConfigError, match=f"{Env.QUEUE_URL} are not set"):
        companion_configs.RelayConfig.from_env({})



def _python_files() -> list[Path]:
    return [path for folder in SCANNED for path in sorted((ROOT / folder).rglob("*.py"))
            if not any(part.startswith(".") or part in ("node_modules", "build") for part in path.parts)]


def test_the_sqs_limits_synth_and_the_consumer_share_are_defined_in_the_contract_only():
    from sendonce_contract import sqs_limits

    home = Path(sqs_limits.__file__).resolve().relative_to(ROOT)
    names = {name for name in vars(sqs_limits) if name.isupper()}
    figures = {sqs_limits.SQS_MAX_VISIBILITY_S, sqs_limits.SQS_MAX_RETENTION_S, sqs_limits.SQS_DEFAULT_RETENTION_S}
    definers: dict[object, set[Path]] = defaultdict(set)
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in names:
                    definers[target.id].add(path.relative_to(ROOT))
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value in figures:
                definers[node.value].add(path.relative_to(ROOT))
    wrong = {str(name): sorted(map(str, paths)) for name, paths in definers.items() if paths != {home}}
    assert wrong == {}, "import these from sendonce_contract.sqs_limits instead"
