# Everything installs itself: a virtualenv with the Python deps, and the CDK CLI with a Node.js jsii supports.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export CDK_DISABLE_VERSION_CHECK := 1
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
# MkDocs Material's banner about its successor, printed at every build.
export NO_MKDOCS_2_WARNING := 1

.PHONY: setup debian-packages test test-stress test-release test-soak test-demo lint demo synth bench clean dist docs integ integ-snapshot test-compat mysql-server
# Every distribution, each built from its own folder: `make dist` writes their wheels and sdists to $(DIST).
DISTRIBUTIONS := contract producer .
# make test's workers (pytest-xdist): on two cores the suite waits on its emulator, its subprocesses and the slow
# proxy's late answers much of the time, so more workers than cores fill it (measured at 1,369 tests: 307 s with
# three, 272 s with four). Tests stay on one worker by file, so a module's deploys run once; each worker has its own
# emulator, PostgreSQL and MySQL database.
TEST_WORKERS ?= 4
DIST ?= dist

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: pyproject.toml contract/pyproject.toml producer/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("sendonce needs Python 3.11 or newer") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./contract -e './producer[postgresql,mysql]' -e '.[dev]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

# A real MariaDB (Debian's package) for the SQL outbox's MySQL tests, installed and started if it is not, with the
# database and user the tests reach (tests/mysql_test_setup.sql). Needs root, as CI has; CI runs it before make test,
# where these tests must run; elsewhere they skip while no MySQL server answers.
# Debian's packages the targets below need, installed (as root) when missing, in one apt run for those asked.
MYSQL_PACKAGE := mariadb-server
BROWSER_PACKAGE := chromium
APT_INSTALL = missing=$$(for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	[ -z "$$missing" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; }
# Both at once: CI installs them beside its first steps.
debian-packages:
	@$(call APT_INSTALL,$(MYSQL_PACKAGE) $(BROWSER_PACKAGE))

mysql-server:
	@$(call APT_INSTALL,$(MYSQL_PACKAGE))
	@mariadb-admin ping >/dev/null 2>&1 || service mariadb start >/dev/null
	@for i in $$(seq 60); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.5; done; mariadb-admin ping
	@mariadb < tests/mysql_test_setup.sql

# Every distribution built and installed from its sdist, and the benchmark suite's quick run (CI runs these too).
test-release: setup
	$(PY) -m pytest -m release

# make test ten times on a fresh clone of HEAD while two CPU-bound processes run beside it (RUNS=, LOAD= to change),
# each run's log in build/stress/; not part of CI: about an hour on two cores.
test-stress:
	@bash tools/stress_test.sh

# The fault bursts under never-resend too (DynamoDB and SQS answering late, during a burst) and the urgent lane's
# flood runs (their aims are BENCHMARKS 9d), and the property tests (the lifecycle's among them) with eight times
# the examples: minutes.
test-soak: setup
	$(PY) -m pytest -m soak
	SENDONCE_EXAMPLES=8 $(PY) -m pytest tests/test_properties.py tests/test_evidence_properties.py tests/test_copy_bound.py \
		tests/test_lifecycle.py

# The demo end to end with a small workload and every assertion on its report (about five minutes; CI runs it).
test-demo: setup
	$(PY) -m pytest -m demo

lint: setup
	$(PY) -m ruff check contract sendonce_constructs ops local testing producer runtime tests examples bench integ tools
	$(PY) -m mypy

synth: setup
	npx cdk synth --quiet

demo: setup
	$(PY) -m sendonce_local demo $(ARGS)

# The docs' picture of the demo (docs/assets/demo-report.png): a full `make demo`, its report.png dated by the run.
demo-picture: setup
	$(PY) -m sendonce_local demo --out build/demo-picture
	cp build/demo-picture/report.png docs/assets/demo-report.png

bench: setup
	$(PY) bench/run.py $(ARGS)

# The integration test on real AWS, in your account and region (it says what it costs); SENDER is an SES identity
# verified there. `make integ-snapshot` rewrites the snapshot `make test` compares (no AWS).
integ: setup
	@$(PY) integ/run.py $(SENDER)

integ-snapshot: setup
	@$(PY) integ/run.py snapshot

# The documentation site (mkdocs.yml: MkDocs Material, the API reference from the docstrings by mkdocstrings, Mermaid
# from the npm package), built strictly: a broken link or anchor, or a generated table that differs from its
# declaration, fails it.
DOCS ?= build/docs
docs: setup
	@rm -rf $(DOCS)
	$(PY) -m mkdocs build --strict --quiet --site-dir $(DOCS)
	@echo "The documentation site: $(DOCS)/index.html"

# The built site in a real browser (Debian's Chromium, installed here when missing): every Mermaid diagram renders
# as SVG, search finds what it should; screenshots in $(DOCS_CHECK)/.
DOCS_CHECK ?= build/docs-check
docs-check: docs
	@$(call APT_INSTALL,$(BROWSER_PACKAGE))
	DOCS_SITE=$(DOCS) DOCS_CHECK=$(DOCS_CHECK) $(PY) -m pytest -q -m browser tests/test_docs_site.py

# Every generated table of the README and the site, the construct's docstring and the resolved props
# (sendonce_constructs/resolved_props.py), rewritten from the one declaration of each thing
# (tools/reference_docs.py); tests/test_reference_docs.py and tests/test_prop_declarations.py fail while they differ.
.PHONY: props-docs docs-check demo-picture
props-docs: setup
	$(PY) -m tools.reference_docs

# The construct tests on the oldest aws-cdk-lib the project claims (the lower bound in pyproject.toml), in a
# second virtualenv; `make test` runs everything on the newest. Here: every file whose tests synthesize the
# constructs' options (an L1 may lack a property the newest has, as CfnTenant's reputation policy before 2.275).
COMPAT_VENV := .venv-compat
COMPAT_CDK := $(shell sed -n 's/^ *"aws-cdk-lib>=\([0-9.]*\),.*/\1/p' pyproject.toml)
COMPAT_TESTS := tests/test_construct_defaults.py tests/test_construct_props.py tests/test_construct_validation.py \
	tests/test_ses_evidence_construct.py tests/test_security_and_observability.py tests/test_tenants.py \
	tests/test_delivery_window.py tests/test_lanes_construct.py tests/test_mis_keyed_guard.py tests/test_expiry.py \
	tests/test_attachments_bucket.py tests/test_allowed_recipients.py tests/test_cancel.py tests/test_quota_watch.py \
	tests/test_key_privacy.py tests/test_outcome_events.py tests/test_waiting_room.py
test-compat: $(COMPAT_VENV)/.installed node_modules/.installed
	$(COMPAT_VENV)/bin/python -c 'import importlib.metadata as m; print("aws-cdk-lib", m.version("aws-cdk-lib"))'
	$(COMPAT_VENV)/bin/python -m pytest -q -n 2 --dist loadfile $(COMPAT_TESTS)

$(COMPAT_VENV)/.installed: pyproject.toml contract/pyproject.toml producer/pyproject.toml
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --upgrade pip
	echo "aws-cdk-lib==$(COMPAT_CDK)" > $(COMPAT_VENV)/constraints.txt
	$(COMPAT_VENV)/bin/python -m pip install --quiet -c $(COMPAT_VENV)/constraints.txt -e ./contract -e ./producer \
		-e '.[dev]'
	@touch $@

# Each sdist first, then its wheel built from that sdist (as pip does from the index), in a virtualenv of only what
# building needs (build and hatchling): no dev dependencies, no Node.js.
BUILD_VENV := .venv-build
$(BUILD_VENV)/.installed:
	@$(PYTHON) -c 'import sys; sys.exit("sendonce needs Python 3.11 or newer") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BUILD_VENV)/bin/python -m pip install --quiet 'build>=1.2' 'hatchling>=1.25'
	@touch $@

dist: $(BUILD_VENV)/.installed
	@for project in $(DISTRIBUTIONS); do $(BUILD_VENV)/bin/python -m build --no-isolation --outdir $(DIST) $$project >/dev/null || exit 1; done
	@ls $(DIST)

clean:
	rm -rf cdk.out .pytest_cache .mypy_cache .ruff_cache build dist site $(COMPAT_VENV) $(BUILD_VENV)
