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
