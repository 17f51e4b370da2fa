"""Worker(db_slots=N) / --db-slots: a worker's connections capped below its slots where tasks do
not use the database (issue 17, point 6; docs/install.md, "How many connections")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from akadze import Akadze, JobState, current
from akadze.testing import drain
from akadze.worker import Worker
from tests.support import fetch, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def pool_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "pool allows" in r.getMessage()]


def test_twenty_slots_on_the_default_pool_warn_unless_db_slots_says_runs_need_few(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task("t")
    async def t() -> None: ...

    with caplog.at_level(logging.WARNING, logger="akadze.worker"):
        Worker(app, slots=20)
    assert len(pool_warnings(caplog)) == 1
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="akadze.worker"):
        Worker(app, slots=20, db_slots=2)
    assert pool_warnings(caplog) == []


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_db_slots_must_be_a_positive_integer(app: Akadze, bad: object) -> None:
    @app.task("t")
    async def t() -> None: ...

    with pytest.raises(ValueError, match="db_slots must be an integer of 1 or more"):
        Worker(app, db_slots=bad)  # type: ignore[arg-type]


async def test_at_most_db_slots_runs_hold_a_connection_in_complete_tx(app: Akadze) -> None:
    inside = 0
    most = 0
    started = 0

    @app.task("hold")
    async def hold(n: int) -> None:
        nonlocal inside, most, started
        started += 1
        async with current().complete_tx():
            inside += 1
            most = max(most, inside)
            await asyncio.sleep(0.1)
            inside -= 1

    jobs = [await hold.enqueue(n=n) for n in range(8)]
    worker = Worker(app, slots=8, db_slots=2, listen=False)
    assert await worker.run(burst=True, handle_signals=False) == 8
    assert started == 8 and most == 2
    for job in jobs:
        done = await app.get_job(job.id)
        assert done is not None and done.state is JobState.SUCCEEDED
    # the cap is the worker's: once it stopped, complete_tx is not limited any more
    from akadze.context import _gates

    assert id(app) not in _gates


async def test_a_small_pool_serves_many_slots_of_tasks_that_do_not_use_the_database(
    make_app: Callable[..., Akadze], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(pool_size=1)  # 1 + 10 of overflow: below 3 + 30
    release = asyncio.Event()
    running = 0

    @app.task("call_api")
    async def call_api(n: int) -> int:
        nonlocal running
        running += 1
        if running == 30:
            release.set()
        await asyncio.wait_for(release.wait(), 10)  # all thirty at once, none holds a connection
        return n

    await call_api.enqueue_many([{"n": n} for n in range(30)])
    with caplog.at_level(logging.WARNING, logger="akadze.worker"):
        worker = Worker(app, slots=30, db_slots=1, listen=False)
    assert pool_warnings(caplog) == []
    assert await worker.run(burst=True, handle_signals=False) == 30
    states = await fetch(database_url, "SELECT state, count(*) FROM akadze_jobs GROUP BY state")
    assert [tuple(r) for r in states] == [("succeeded", 30)]


async def test_drain_is_not_capped(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        async with current().complete_tx():
            pass

    await t.enqueue()
    assert await drain(app) == 1


def test_akadze_worker_takes_db_slots(database_url: str) -> None:
    import subprocess

    from tests.support import PYTHON, ROOT, subprocess_env

    env = subprocess_env(database_url, BASIC_APP_DATABASE_URL=database_url)
    command = [PYTHON, "-m", "akadze.cli", "worker", "tests.apps.basic:from_environment", "--burst"]
    done = subprocess.run(
        [*command, "--slots", "20", "--db-slots", "2"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "pool allows" not in done.stderr
    refused = subprocess.run(
        [*command, "--db-slots", "0"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
