"""The docs cannot drift from the code: every reference table is rendered from the one declaration of what it lists
(tools/reference_docs.py), and the figures, counts and names the pages state are held to their source."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from sendonce_constructs.props import resolve_props
from sendonce_constructs.queue_props import declared_props
from sendonce_contract.outcome_events import OUTCOME_TYPES
from tools import reference_docs

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REGENERATE = "a declaration changed: run `make props-docs` and commit"
# Where BENCHMARKS.md's figures may appear: the page that includes it whole.
BENCHMARK_INCLUDES = {"benchmarks.md"}


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@pytest.mark.parametrize("document", reference_docs.documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_generated_table_is_the_one_its_declaration_renders(document):
    assert reference_docs.stale_blocks(_text(document)) == [], REGENERATE


def test_every_reference_table_is_on_a_page():
    placed = {name for path in reference_docs.documents() for name in reference_docs.blocks_in(_text(path))}
    assert placed == set(reference_docs.RENDERERS)


def test_the_full_prop_table_lists_every_declared_prop_and_the_readme_ten():
    props_page = reference_docs.blocks_in(_text(DOCS / "reference" / "props.md"))["props"]
    assert [m for m in re.findall(r"^\| `([a-z_]+)` \|", props_page, re.M)] == list(declared_props())
    readme = reference_docs.blocks_in(_text(ROOT / "README.md"))["props-first"]
    assert re.findall(r"^\| `([a-z_]+)` \|", readme, re.M) == list(reference_docs.FIRST_PROPS)
    assert len(reference_docs.FIRST_PROPS) == 10 and set(reference_docs.FIRST_PROPS) <= set(declared_props())


def test_the_dedupe_ttl_default_names_what_the_outbox_makes_it():
    # The example app has outbox=True: its dedupe_ttl is not the 7-day default, and the table says by how much.
    doc = declared_props()["dedupe_ttl"].default_doc
    days = resolve_props({"sender": "example.com", "outbox": True}, "Test").dedupe_ttl.to_days()
    assert doc.startswith("7 days; with `outbox`") and f"({days:g} days with the default `retention_period`)" in doc


def test_every_alarm_has_a_runbook_under_its_own_name():
    runbooks = re.findall(r"^### ([A-Za-z]+)$", _text(DOCS / "operating.md"), re.M)
    assert set(reference_docs.alarm_names()) <= set(runbooks)
    assert len(reference_docs.alarm_names()) >= 13


def test_the_outcome_events_page_says_when_each_event_is_published():
    page = _text(DOCS / "outcome-events.md")
    listed = re.findall(r"^\| `([a-z-]+)` \| `Email [A-Za-z -]+` \|", page, re.M)
    assert listed == [outcome.transition for outcome in OUTCOME_TYPES]
    # Email Dead-Lettered is no ledger transition: the page must not claim it carries status and sesMessageIds.
    fields = reference_docs.blocks_in(_text(DOCS / "reference" / "outcome-events.md"))["outcome-events"]
    dead = next(line for line in fields.splitlines() if line.startswith("| `dead-lettered`"))
    assert "`status`" not in dead and "`sesMessageIds`" not in dead and "`reasonCode`" in dead
    assert "carries `reasonCode`, `reason` and `sourceMessageId` instead" in page


def _prose_pages() -> list[Path]:
    return [ROOT / "README.md"] + [p for p in sorted(DOCS.rglob("*.md")) if p.name not in BENCHMARK_INCLUDES]


def _outside_code(text: str) -> str:
    return re.sub(r"(?ms)^```.*?^```", "", text)


@pytest.mark.parametrize("page", _prose_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_retypes_a_measured_figure(page):
    # Ratios, milliseconds, microseconds and prices are BENCHMARKS.md's: a page links to it, never copies them.
    prose = _outside_code(_text(page))
    figures = re.findall(r"\b\d+(?:\.\d+)?x\b|\b\d+(?:\.\d+)? ?(?:ms|µs)\b|\$\d[\d.,]*", prose)
    assert figures == []


@pytest.mark.parametrize("page", _prose_pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_claims_a_python_the_project_does_not_test(page):
    # The supported-versions table claims Python 3.11 only.
    assert not re.search(r"3\.11\+|3\.11 or newer|3\.11 and newer", _text(page))


def test_the_guarantee_tables_tests_exist():
    """Every test the guarantees page names, in every table: by its whole name, or by a beginning marked ``...``."""
    tests = "\n".join(_text(path) for path in sorted((ROOT / "tests").glob("test_*.py")))
    defined = set(re.findall(r"^def (test_[a-z0-9_]+)", tests, re.M))
    files = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    named = re.findall(r"`(test_[a-z0-9_.]+?)(\.\.\.)?`", _text(DOCS / "guarantees.md"))
    assert len(named) >= 100
    for name, abridged in named:
        if name.endswith(".py"):
            assert name in files, name
        elif abridged:
            assert any(test.startswith(name.rstrip("_")) for test in defined), f"{name}..."
        else:
            assert name in defined, f"{name}: no such test (a beginning of a name ends with ...)"


def test_every_distribution_names_the_same_project_urls_as_the_site():
    urls = [tomllib.loads(_text(ROOT / path))["project"]["urls"]
            for path in ("pyproject.toml", "contract/pyproject.toml", "producer/pyproject.toml")]
    assert urls[0] == urls[1] == urls[2]
    site = _text(ROOT / "mkdocs.yml")
    assert f"site_url: {urls[0]['Documentation']}" in site
    readme = _text(ROOT / "README.md")
    assert urls[0]["Documentation"] in readme and urls[0]["Repository"] in readme


def test_the_licence_is_the_apache_2_text():
    licence = _text(ROOT / "LICENSE")
    assert "Apache License\n                           Version 2.0, January 2004" in licence
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and len(licence.splitlines()) > 200
