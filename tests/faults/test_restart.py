"""PostgreSQL restarted (fast, then immediate) mid-run: workers reconnect on their own."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .pgserver import OwnServer
from .scenarios import Env, db_restart, own_env


@pytest.fixture
async def restartable_env(scenario_folder: Path) -> AsyncIterator[Env]:
    """A durable server of this test's own: restarting it must not disturb any other test."""
    folder = Path(tempfile.mkdtemp(prefix="akadze-restart-"))
    server = OwnServer(folder, durable=True)
    server.start()
    try:
        yield await own_env(server, f"restart_{os.getpid()}", scenario_folder)
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(300)
async def test_workers_reconnect_on_their_own_after_fast_and_immediate_restarts(restartable_env: Env) -> None:
    fig = await db_restart(restartable_env, jobs=600, seconds=24)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["worker deaths"] == 0
    assert fig.extra["graceful exits"] == "0/0/0"
    for mode in ("fast", "immediate"):
        assert fig.extra[f"{mode}: workers claiming again"] == "3/3"
