"""PgBouncer in transaction mode: outcomes, load and a SIGKILL through it; polling instead of LISTEN."""

from __future__ import annotations

import pytest

from . import pgbouncer
from .scenarios import Env, through_pgbouncer

pytestmark = pytest.mark.skipif(
    not pgbouncer.available(), reason="pgbouncer is not installed (apt-get install pgbouncer)"
)


@pytest.mark.timeout(240)
async def test_everything_works_through_pgbouncer_in_transaction_mode(fault_env: Env) -> None:
    fig = await through_pgbouncer(fault_env)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["outcome rows wrong"] == []
    assert fig.extra["complete_tx effect"] == 1
    assert fig.extra["prepared-statement errors"] == 0
    assert fig.extra["worker tracebacks"] == 0
    assert fig.extra["workers polling (LISTEN fallback)"] >= 2
    assert fig.extra["pickup max s"] <= 1.0 + 0.5


async def _listener_works(url: str) -> bool:
    """Run the worker's Listener alone; True once its probe passed, False once it gave up."""
    import asyncio

    from akadze import Akadze
    from akadze.worker.listener import Listener

    app = Akadze(database_url=url)
    listener = Listener(app.engine, worker_id="probe-test", queues={"faults"}, wake=lambda: None)
    task = asyncio.create_task(listener.run())
    try:
        for _ in range(100):
            if listener.working or task.done():
                break
            await asyncio.sleep(0.1)
        return listener.working
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await app.dispose()


@pytest.mark.timeout(60)
async def test_the_listener_probe_is_not_fooled_by_a_transaction_pooler(fault_env: Env) -> None:
    """Through PgBouncer a NOTIFY sent on the listening connection itself comes back on the
    server connection holding the LISTEN; only a probe from another session tells the truth."""
    assert fault_env.server is not None
    bouncer = pgbouncer.PgBouncer(
        fault_env.folder / "pgbouncer", fault_env.server.host, fault_env.server.port, pool_size=4
    )
    port = await bouncer.start()
    try:
        assert await _listener_works(fault_env.url)
        assert not await _listener_works(fault_env.url_via(port))
    finally:
        await bouncer.stop()


async def _commits(dsn: str) -> int:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        return int(
            await conn.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        )
    finally:
        await conn.close()


@pytest.mark.timeout(60)
async def test_a_statement_through_pgbouncer_is_one_transaction_with_no_set_before_it(fault_env: Env) -> None:
    """asyncpg announces client_encoding 'utf-8' and the server reports UTF8: PgBouncer took them
    for different settings and sent a SET before every transaction it handed to a server
    connection (an extra round trip and transaction per statement). The engine announces UTF8."""
    from akadze import Akadze
    from akadze.db.raw import driver_connection

    assert fault_env.server is not None
    bouncer = pgbouncer.PgBouncer(
        fault_env.folder / "pgbouncer", fault_env.server.host, fault_env.server.port, pool_size=2
    )
    port = await bouncer.start()
    app = Akadze(database_url=fault_env.url_via(port))
    statements = 40
    try:
        async with app.engine.connect() as conn:
            raw = await driver_connection(conn)
            await raw.fetchval("SELECT 1")  # the pooler's server connections are open
            before = await _commits(fault_env.dsn)
            for _ in range(statements):
                await raw.fetchval("SELECT 1")
    finally:
        await app.dispose()
        await bouncer.stop()  # its server connections end, and flush their statistics
    spent = await _commits(fault_env.dsn) - before
    # each statement one transaction, plus the two _commits connections' own; a SET before each
    # statement would make it twice the statements
    assert statements <= spent <= statements + 10, spent
