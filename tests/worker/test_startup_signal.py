"""A worker takes SIGTERM as a graceful stop from the moment it starts: a signal that arrives
while it checks the schema (here held behind a lock) ends it with exit 0, registered nowhere,
instead of killing it. A real ``akadze worker`` process, signalled once the log shows it
waiting."""

from __future__ import annotations

import asyncio
import signal

import asyncpg

from tests.conftest import wait_until
from tests.support import PYTHON, ROOT, fetchval, plain, subprocess_env


async def _waiting_on_lock(database_url: str) -> bool:
    waiting = await fetchval(
        database_url,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE '%akadze_schema_migrations%'",
    )
    return bool(waiting)


async def test_sigterm_while_the_schema_is_checked_is_a_graceful_stop(database_url: str) -> None:
    holder = await asyncpg.connect(plain(database_url))
    transaction = holder.transaction()
    await transaction.start()
    await holder.execute("LOCK TABLE akadze_schema_migrations IN ACCESS EXCLUSIVE MODE")
    process = await asyncio.create_subprocess_exec(
        PYTHON,
        "-m",
        "akadze.cli",
        "worker",
        "tests.apps.basic:app",
        cwd=ROOT,
        env=subprocess_env(database_url),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    lines: list[str] = []
    try:
        await wait_until(lambda: _waiting_on_lock(database_url), timeout=60, interval=0.1)
        process.send_signal(signal.SIGTERM)

        async def logged_the_signal() -> bool:
            if process.returncode is not None:
                return True  # killed: the assertion below says so
            line = await asyncio.wait_for(process.stderr.readline(), timeout=30)  # type: ignore[union-attr]  # (checked above)
            lines.append(line.decode())
            return "received SIGTERM" in lines[-1] or not line

        await wait_until(logged_the_signal, timeout=60)
    finally:
        await transaction.rollback()
        await holder.close()
    rest = await asyncio.wait_for(process.stderr.read(), timeout=60)
    code = await asyncio.wait_for(process.wait(), timeout=60)
    log = "".join(lines) + rest.decode()
    assert code == 0, log
    assert "stopped before it started" in log
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workers") == 0
