# Everything installs itself: a virtualenv with the Python deps, and the CDK CLI with a Node.js jsii supports.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1

.PHONY: setup test lint demo synth bench clean dist docs integ integ-snapshot test-compat
# Every distribution, each built from its own folder: `make dist` writes their wheels and sdists to $(DIST).
DISTRIBUTIONS := contract producer .
DIST ?= dist

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml contract/pyproject.toml producer/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("sendonce needs Python 3.11 or newer") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./contract -e ./producer -e '.[dev]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

test: setup
	$(PY) -m pytest

lint: setup
	$(PY) -m ruff check contract sendonce_constructs producer runtime tests examples bench integ
	$(PY) -m mypy

synth: setup
	npx cdk synth --quiet

demo: setup
	$(PY) -m sendonce_constructs.local demo $(ARGS)

bench: setup
	$(PY) bench/run.py $(ARGS)

# The integration test on real AWS, in your account and region (it says what it costs); SENDER is an SES identity
# verified there. `make integ-snapshot` rewrites the snapshot `make test` compares (no AWS).
integ: setup
	@$(PY) integ/run.py $(SENDER)

integ-snapshot: setup
	@$(PY) integ/run.py snapshot

# The API reference of what users import, from the docstrings; any warning fails it.
API_PACKAGES := sendonce_constructs sendonce_producer sendonce_contract
DOCS ?= build/docs
docs: setup
	@mkdir -p $(dir $(DOCS)) && rm -rf $(DOCS)
	@$(PY) -m pdoc --docformat restructuredtext -o $(DOCS) $(API_PACKAGES) >$(DOCS).log 2>&1 || { cat $(DOCS).log; exit 1; }
	@if grep '^Warn' $(DOCS).log; then echo "make docs: fix the warnings above"; exit 1; fi
	@echo "API reference: $(DOCS)/index.html"

# Each sdist first, then its wheel built from that sdist (as pip does from the index).
dist: setup
	@for project in $(DISTRIBUTIONS); do $(PY) -m build --no-isolation --outdir $(DIST) $$project >/dev/null || exit 1; done
	@ls $(DIST)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache build dist
