"""Fixtures of the fault scenarios: a PostgreSQL of their own, one database per test.

The worker processes of these scenarios would crowd a shared server, and some scenarios put
a proxy or PgBouncer in front of it, so they get their own embedded server on a loopback
port (not durable: nothing here crashes it; the restart scenario starts a durable one).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from .pgserver import OwnServer
from .scenarios import Env, own_env

_names = itertools.count()


@pytest.fixture(scope="session")
def own_server() -> Iterator[OwnServer]:
    folder = Path(tempfile.mkdtemp(prefix="akadze-faults-"))
    server = OwnServer(folder, durable=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


#: this run's folder of worker logs, kept after the run (pytest's tmp_path is rotated away too
#: soon); a folder of its own, so that a run by another user or a second run at the same time
#: never meets it; its path is printed at the end of the run
_run_logs: list[Path] = []


@pytest.fixture(scope="session")
def fault_logs() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="akadze-fault-logs-"))
    _run_logs.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for folder in _run_logs:
        terminalreporter.write_line(f"fault scenario logs of this run: {folder}/<test>")


@pytest.fixture
def scenario_folder(request: pytest.FixtureRequest, fault_logs: Path) -> Path:
    folder = fault_logs / request.node.name[:120]
    folder.mkdir()
    return folder


@pytest.fixture
async def fault_env(own_server: OwnServer, scenario_folder: Path) -> AsyncIterator[Env]:
    """A fresh database with akadze's schema and the ledger, on the scenarios' own server;
    logs go to this run's folder (printed at the end), one folder per test."""
    name = f"faults_{os.getpid()}_{next(_names)}"
    env = await own_env(own_server, name, scenario_folder)
    yield env
    try:
        import asyncpg

        conn = await asyncpg.connect(own_server.dsn())
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
    except Exception:  # noqa: S110 (the server goes away with the session anyway)
        pass
