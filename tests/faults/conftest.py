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


#: worker logs of the last run of each test (pytest's tmp_path is rotated away too soon)
LOGS = Path(tempfile.gettempdir()) / "akadze-faults"


@pytest.fixture
def scenario_folder(request: pytest.FixtureRequest) -> Path:
    folder = LOGS / request.node.name[:120]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
async def fault_env(own_server: OwnServer, scenario_folder: Path) -> AsyncIterator[Env]:
    """A fresh database with akadze's schema and the ledger, on the scenarios' own server;
    logs go to /tmp/akadze-faults/<test name>."""
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
