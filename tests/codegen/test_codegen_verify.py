"""``akadze codegen verify`` (hard case 41) against workers running on the test database: workers
publish (task, queue, args_fp) when they register; stubs that match exit 0, a different
fingerprint or queue exits 1 naming both sides, a queue that no live worker consumes is
reported (exit 1 unless --allow-unconsumed), and dead workers do not count."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from sqlalchemy import text

from akadze import Akadze
from akadze.db.queries import Queries
from akadze.worker import Worker
from akadze_codegen.discover import build_manifest
from akadze_codegen.signature import encode_manifest
from akadze_codegen.verify import verify
from tests.conftest import wait_until
from tests.support import PYTHON, ROOT, execute, fetch, fetchval, module_database, subprocess_env


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def send(user_id: int) -> None: ...


async def build(report_id: int, title: str) -> None: ...


def define(app: Akadze) -> Akadze:
    app.register(send, name="mail.send", queue="mail")
    app.register(build, name="reports.build", queue="reports")
    return app


@asynccontextmanager
async def running(app: Akadze, database_url: str, queues: list[str] | None = None) -> AsyncIterator[Worker]:
    """A worker serving ``queues`` until the block ends (registered when the block starts)."""
    worker = Worker(
        app,
        queues=queues,
        listen=False,
        poll_interval=timedelta(milliseconds=100),
        heartbeat_interval=timedelta(milliseconds=200),
        lost_after=timedelta(seconds=5),
    )
    serving = asyncio.create_task(worker.run(handle_signals=False))

    async def registered() -> bool:
        return bool(
            await fetchval(database_url, "SELECT count(*) FROM akadze_workers WHERE id = $1", worker.id)
        )

    try:
        await wait_until(registered)
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 10)


def stubs(app: Akadze, path: Path, **replaced: dict[str, Any]) -> Path:
    """The manifest codegen would write for ``app``, with some tasks' fields replaced."""
    manifest = build_manifest(app, "tests:app")
    tasks = [msgspec.structs.replace(t, **replaced.get(t.name, {})) for t in manifest.tasks]
    path.write_bytes(encode_manifest(msgspec.structs.replace(manifest, tasks=tasks)))
    return path


async def cli(database_url: str, *args: str) -> tuple[int, str, str]:
    """``akadze codegen verify`` in a subprocess (the command runs its own event loop)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [PYTHON, "-m", "akadze.cli", "codegen", "verify", *args],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


async def test_workers_publish_what_they_run_and_take_it_along_when_they_go(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = define(make_app())
    async with running(app, database_url, ["mail"]) as worker:
        rows = await fetch(
            database_url,
            "SELECT worker_id::text, task, queue, args_fp FROM akadze_task_schemas ORDER BY task",
        )
        assert [tuple(r) for r in rows] == [
            (worker.id, "mail.send", "mail", app.tasks["mail.send"].args_fp),
            (worker.id, "reports.build", "reports", app.tasks["reports.build"].args_fp),
        ]
    # a graceful exit unregisters: the rows go with the worker
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_task_schemas") == 0


async def test_a_forgotten_worker_loses_its_rows_and_registering_again_restores_them(
    app: Akadze, database_url: str
) -> None:
    registration: dict[str, Any] = {
        "worker_id": "00000000-0000-0000-0000-00000000000a",
        "name": "w",
        "host": "h",
        "pid": 1,
        "queues": ["mail"],
        "slots": 1,
        "lost_after_s": 1.0,
        "tasks": [("mail.send", "mail", "aaaaaaaaaaaaaaaa")],
    }
    async with app.engine.begin() as conn:
        await Queries.register_worker(conn, **registration)
        await Queries.register_worker(conn, **registration)  # again (the heartbeat's path): no error
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_task_schemas") == 1
    await execute(database_url, "UPDATE akadze_workers SET heartbeat_at = now() - interval '1 hour'")
    async with app.engine.begin() as conn:
        assert await Queries.forget_lost_workers(conn) == [registration["worker_id"]]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_task_schemas") == 0
    async with app.engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection  # the worker's raw asyncpg path
        await Queries.register_worker(raw, **registration)
    rows = await fetch(database_url, "SELECT task, queue, args_fp FROM akadze_task_schemas")
    assert [tuple(r) for r in rows] == [("mail.send", "mail", "aaaaaaaaaaaaaaaa")]


async def test_stubs_that_match_the_live_workers_exit_0(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    app = define(make_app())
    package = tmp_path / "clients"
    package.mkdir()
    stubs(app, package / "_manifest.json")
    async with running(app, database_url):
        code, out, err = await cli(database_url, "--package", str(package))
    assert (code, err) == (0, "")
    fp = app.tasks["mail.send"].args_fp
    assert f"ok       mail.send      queue 'mail', args_fp {fp}, 1 live worker" in out
    assert "2 stub(s), 0 error(s), 0 on unconsumed queues; 1 live worker(s)" in out


async def test_a_stub_with_another_fingerprint_exits_1_naming_the_task_and_both(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    app = define(make_app())
    manifest = stubs(app, tmp_path / "m.json", **{"mail.send": {"args_fp": "0123456789abcdef"}})
    async with running(app, database_url):
        code, out, err = await cli(database_url, "--manifest", str(manifest))
    assert code == 1
    [line] = [line for line in out.splitlines() if line.startswith("ERROR")]
    live_fp = app.tasks["mail.send"].args_fp
    assert line.startswith("ERROR    mail.send ")
    assert f"argument fingerprint differs: stub 0123456789abcdef, live worker {live_fp}" in line
    assert "ok       reports.build" in out
    assert "stubs do not match" in err


async def test_a_stub_with_another_queue_exits_1(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    """The worker serves both queues, but registers the task on another one than the stub's."""
    app = define(make_app())
    manifest = stubs(app, tmp_path / "m.json", **{"mail.send": {"queue": "reports"}})
    async with running(app, database_url):
        code, out, _ = await cli(database_url, "--manifest", str(manifest))
    assert code == 1
    assert "queue differs: the stub enqueues into 'reports', live workers register the task on 'mail'" in out


async def test_a_stub_whose_queue_no_live_worker_consumes_is_reported(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    app = define(make_app())
    manifest = stubs(app, tmp_path / "m.json")
    async with running(app, database_url, ["mail"]):  # nobody serves "reports"
        code, out, err = await cli(database_url, "--manifest", str(manifest))
        assert code == 1
        assert (
            "WARNING  reports.build  no live worker consumes queue 'reports': its jobs would never run; "
            "live workers run the task on 'reports'"
        ) in out
        assert "ok       mail.send" in out
        assert "--allow-unconsumed" in err
        code, out, _ = await cli(database_url, "--manifest", str(manifest), "--allow-unconsumed")
        assert code == 0 and "WARNING  reports.build" in out


async def test_dead_workers_do_not_count(make_app: Callable[..., Akadze], database_url: str) -> None:
    """A worker whose heartbeat is older than its lost_after, not yet forgotten, serves nothing
    and runs nothing: here it claims the queue the live worker leaves alone and another
    fingerprint for the task the live worker runs."""
    app = define(make_app())
    manifest = build_manifest(app, "tests:app")
    async with running(app, database_url, ["mail"]), app.engine.begin() as conn:
        # uncommitted, so that the live worker's rescuer cannot forget the dead one first
        await Queries.register_worker(
            conn,
            worker_id="00000000-0000-0000-0000-0000000000dd",
            name="dead",
            host="h",
            pid=1,
            queues=["mail", "reports"],
            slots=1,
            lost_after_s=30.0,
            tasks=[
                ("mail.send", "mail", "dddddddddddddddd"),
                ("reports.build", "reports", app.tasks["reports.build"].args_fp),
            ],
        )
        await conn.execute(
            text("UPDATE akadze_workers SET heartbeat_at = now() - interval '1 hour' WHERE name = 'dead'")
        )
        published = await conn.scalar(text("SELECT count(*) FROM akadze_task_schemas"))
        findings = [(f.task, f.level) for f in await verify(conn, manifest)]
        await conn.rollback()
    assert published == 4  # the dead worker's rows are there; verify looks past them
    assert findings == [("mail.send", "ok"), ("reports.build", "unconsumed")]


async def test_no_live_worker_at_all(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    app = define(make_app())
    code, out, _ = await cli(database_url, "--manifest", str(stubs(app, tmp_path / "m.json")))
    assert code == 1
    assert out.count("WARNING") == 2 and "0 live worker(s)" in out


async def test_usage_and_connection_errors_exit_2(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Path
) -> None:
    app = define(make_app())
    manifest = str(stubs(app, tmp_path / "m.json"))
    code, _, err = await cli(database_url)
    assert code == 2 and "--package" in err
    code, _, err = await cli(database_url, "--manifest", str(tmp_path / "none.json"))
    assert code == 2 and err.startswith("error: ") and "no such file" in err
    code, _, err = await cli(
        database_url, "--manifest", manifest, "--dsn", "postgresql://nobody@127.0.0.1:1/x"
    )
    assert code == 2 and "cannot reach the database" in err
    assert err.count("\n") == 1
