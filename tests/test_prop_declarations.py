"""Each prop of SendOnceEmailQueue is declared once (sendonce_constructs/queue_props.py): the docs' prop
tables (tests/test_reference_docs.py holds them) and the construct's docstring are rendered from the declarations,
the keyword API is checked against them, and every error carries a stable id and the construct's path."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_sqs as sqs
from construct_support import build, make_stack
from constructs import Construct

from sendonce_constructs import (
    SendOnceConfigurationError,
    SendOnceEmailQueue,
    derivations,
    email_queue,
    rules,
)
from sendonce_constructs.prop_readings import PropReadings
from sendonce_constructs.props import PipelineProps, read, read_seconds
from sendonce_constructs.queue_props import REQUIRED, Derived, declared_props, prop_text
from sendonce_constructs.unresolved import UNRESOLVED
from tools import reference_docs, resolved_props_source

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = ("the declarations in sendonce_constructs/queue_props.py changed: run `make props-docs` "
              "and commit")
S = cdk.Duration.seconds


def test_the_props_reference_page_is_the_one_the_declarations_render():
    page = (ROOT / "docs" / "reference" / "props.md").read_text(encoding="utf-8")
    assert reference_docs.blocks_in(page)["props"] == reference_docs.block("props"), REGENERATE


def test_the_construct_docstring_is_the_one_the_declarations_render():
    source = inspect.getsource(email_queue)
    assert reference_docs.docstring_params(source) == reference_docs.render_docstring_params(), REGENERATE
    rendered = inspect.cleandoc(reference_docs.render_docstring_params())
    assert rendered in inspect.cleandoc(SendOnceEmailQueue.__doc__ or "")


def test_every_declared_prop_is_documented_and_reaches_the_resolved_props():
    declared = declared_props()
    assert len(declared) >= 52
    assert set(declared) <= {field.name for field in dataclasses.fields(PipelineProps)}
    for name, prop in declared.items():
        assert prop.text and prop.default_doc, name
    assert [name for name, prop in declared.items() if prop.default is REQUIRED] == ["sender"]


def test_leaving_a_prop_out_and_passing_none_build_the_same_pipeline():
    # Today's keyword API: every optional keyword accepts None as "the default".
    _, defaults = build()
    nones = {name: None for name, prop in declared_props().items() if prop.default is not REQUIRED}
    _, with_nones = build(**nones)
    assert with_nones.to_json() == defaults.to_json()


def test_an_unknown_keyword_fails_naming_it_and_the_prop_meant():
    with pytest.raises(SendOnceConfigurationError) as error:
        build(visiblity_timeout=S(400))
    assert error.value.id == "SendOnce.UnknownProp"
    assert error.value.path == "Test/Receipts"
    assert "visiblity_timeout is not a prop of SendOnceEmailQueue; did you mean visibility_timeout?" in str(
        error.value)


def test_a_missing_sender_fails_naming_it():
    with pytest.raises(SendOnceConfigurationError, match=r"SendOnce\.MissingProp at Test/Receipts: sender is "
                                                         r"required: the SES identity to send from"):
        SendOnceEmailQueue(make_stack(), "Receipts")  # type: ignore[call-arg]


@pytest.mark.parametrize(("props", "rule_id", "message"), [
    ({"visibility_timeout": S(60)}, "SendOnce.InvalidVisibilityTimeout", "visibility_timeout (60 s) must be at least"),
    ({"batch_size": 11}, "SendOnce.InvalidBatching", "batch_size (11) above 10 needs a max_batching_window"),
    ({"send_rate": 14}, "SendOnce.InvalidSendRate", "send_rate (14/s) needs max_concurrency"),
    ({"encryption": sqs.QueueEncryption.UNENCRYPTED}, "SendOnce.InvalidEncryption",
     "encryption (UNENCRYPTED) is not allowed"),
    ({"ses_events": False, "evidence_grace_period": S(60)}, "SendOnce.EvidenceGracePeriodWithoutEvents",
     "evidence_grace_period was given with ses_events=False"),
], ids=["visibility", "batching", "send rate", "encryption", "grace without events"])
def test_a_rule_error_carries_the_rules_id_and_the_construct_path(props, rule_id, message):
    stack = make_stack()
    scope = Construct(stack, "Mail")
    with pytest.raises(SendOnceConfigurationError) as error:
        SendOnceEmailQueue(scope, "Receipts", sender="example.com", **props)
    assert (error.value.id, error.value.path) == (rule_id, "Test/Mail/Receipts")
    assert error.value.message.startswith(message)
    assert str(error.value) == f"{rule_id} at Test/Mail/Receipts: {error.value.message}"


def test_the_methods_errors_carry_an_id_and_the_construct_path():
    pipeline, _ = build(outcome_events=False, ses_events=False)
    cases = [
        (lambda: pipeline.grant_outbox_write(pipeline.role), "SendOnce.NeedsOutbox", "needs outbox=True"),
        (lambda: pipeline.on_outcome("Bounces"), "SendOnce.NeedsOutcomeEvents", "needs outcome_events=True"),
        (lambda: pipeline.metric_complaint_rate(), "SendOnce.NeedsSesEvents", "needs ses_events=True"),
    ]
    for call, rule_id, message in cases:
        with pytest.raises(SendOnceConfigurationError, match=re.escape(message)) as error:
            call()
        assert (error.value.id, error.value.path) == (rule_id, "Test/Receipts")
    with_events, _ = build()
    with pytest.raises(SendOnceConfigurationError, match="are not outcomes") as error:
        with_events.on_outcome("Typo", outcomes=["bouncd"])
    assert (error.value.id, error.value.path) == ("SendOnce.UnknownOutcome", "Test/Receipts")


def test_a_token_reaches_the_rules_as_unresolved_and_an_absent_prop_as_none():
    stack = make_stack()
    number = cdk.CfnParameter(stack, "Number", type="Number").value_as_number
    assert read(number) is UNRESOLVED
    assert read_seconds(cdk.Duration.seconds(number)) is UNRESOLVED
    assert read(None) is None and read_seconds(None) is None
    assert (read(5.0), read_seconds(S(30))) == (5.0, 30)
    # A per-instance max_send_rate with a max_concurrency known only at deploy time (each instance's pace is known;
    # send_rate needs a known cap to divide); a batch above 10 with a batching window known only at deploy time:
    # not refused for lacking a window (20 records of SQS's default 256 KiB fit one invocation).
    build(stack, max_send_rate=2.8, max_concurrency=cdk.Token.as_number(number), batch_size=20,
          max_batching_window=S(number))


def test_every_rule_has_its_own_stable_id():
    ids = [rule.id for rule in rules.RULES if rule.id is not None] + [f"SendOnce.{row.id}" for row in rules.RANGES]
    assert len(set(ids)) == len(ids), "two rules share an id"
    assert all(re.fullmatch(r"SendOnce\.[A-Z][A-Za-z]+", rule_id) for rule_id in ids)
    assert [rule.check for rule in rules.RULES if rule.id is None] == [rules.check_ranges]


def test_a_range_error_and_the_props_reference_say_the_bounds_of_one_row():
    row = next(row for row in rules.RANGES if row.prop == "function_timeout")
    with pytest.raises(SendOnceConfigurationError) as error:
        build(function_timeout=S(901))
    assert error.value.id == "SendOnce.InvalidFunctionTimeout"
    assert error.value.message.startswith(f"function_timeout (901 s) must be {row.bounds()}{row.limit}; ")
    assert prop_text("function_timeout").endswith(f"; {row.bounds()}{row.limit}")
    assert "between 1 s and 900 s" in prop_text("function_timeout")


def test_the_resolved_props_are_the_ones_the_declarations_render():
    source = (ROOT / "sendonce_constructs" / "resolved_props.py").read_text(encoding="utf-8")
    assert source == resolved_props_source.render_resolved_props(), REGENERATE
    fields = [field.name for field in dataclasses.fields(PipelineProps)]
    assert fields == ["given", *resolved_props_source.resolved_fields()]


def _computations():
    derived = [prop.default.compute for prop in declared_props().values() if isinstance(prop.default, Derived)]
    return [rule.check for rule in rules.RULES] + derived + list(derivations.FACTS)


@pytest.mark.parametrize("compute", _computations(), ids=lambda compute: inspect.unwrap(compute).__name__)
def test_each_rule_and_derivation_is_a_plain_function_of_the_props_that_reads_only_what_they_hold(compute):
    """One parameter, the props (as the rules read them, or as built so far): no value reaches it by its name."""
    plain = inspect.unwrap(compute)
    [parameter] = inspect.signature(plain).parameters.values()
    holds = PropReadings if compute in [rule.check for rule in rules.RULES] else PipelineProps
    assert (parameter.name, parameter.annotation) == ("p", holds.__name__)
    fields = {field.name for field in dataclasses.fields(holds)}
    read = {name.removesuffix(" (given)") for name in resolved_props_source.reads(compute)}
    assert read <= fields, f"not a prop or a fact: {read - fields}"
    given = {name.removesuffix(" (given)") for name in resolved_props_source.reads(compute) if "(given)" in name}
    assert given <= set(declared_props()), f"not a prop: {given - set(declared_props())}"


def _imports(module) -> set[str]:
    """What ``module`` imports when it runs (its imports for the type checker alone, which name types, left out)."""
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            node.body = []
    imported = {"." * node.level + (node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return imported | {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def test_every_rule_is_registered_and_no_prop_reaches_a_rule_or_a_derivation_but_through_its_parameter():
    registered = {inspect.unwrap(rule.check).__name__ for rule in rules.RULES}
    defined = {name for name, value in vars(rules).items() if name.startswith("check_") and callable(value)}
    assert defined == registered
    # The modules that hold the props given and built are out of their reach; the rules are CDK-free besides.
    holders = {".props", ".queue_props", ".resolved_props"}
    assert not _imports(rules) & (holders | {".readings", ".derivations"})
    assert not {module for module in _imports(rules) if module.startswith("aws_cdk")}
    assert not _imports(derivations) & holders


def test_a_derived_prop_reads_only_values_known_before_it():
    """Props that are not derived, and derived props declared before it (computed first)."""
    declared = declared_props()
    order = list(declared)
    derived = {name for name, prop in declared.items() if isinstance(prop.default, Derived)}
    for name in derived:
        reads = set(resolved_props_source.reads(declared[name].default.compute))
        later = {read for read in reads if read in derived and order.index(read) >= order.index(name)}
        assert not later, f"{name} reads {later}, derived after it"


def test_the_readings_the_rules_read_are_the_ones_the_declarations_render():
    source = (ROOT / "sendonce_constructs" / "prop_readings.py").read_text(encoding="utf-8")
    assert source == resolved_props_source.render_prop_readings(), REGENERATE
