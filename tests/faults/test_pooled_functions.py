"""Behind a real PgBouncer in transaction mode a worker's claim cycle calls the functions of
migration 0011 (akadze.db.pooled) and drains correctly; without them it sends the statements,
as before 0011."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from akadze.db.pooled import POOLED, function_name
from tests.support import POOLED_JOBS, drain_through, function_calls

from . import pgbouncer
from .scenarios import Env

pytestmark = pytest.mark.skipif(
    not pgbouncer.available(), reason="pgbouncer is not installed (apt-get install pgbouncer)"
)


@pytest.fixture
async def bouncer_url(fault_env: Env) -> AsyncIterator[str]:
    """The scenario's database through a PgBouncer in transaction mode."""
    assert fault_env.server is not None
    bouncer = pgbouncer.PgBouncer(fault_env.folder / "pgbouncer", "127.0.0.1", fault_env.server.port)
    port = await bouncer.start()
    try:
        yield fault_env.url_via(port)
    finally:
        await bouncer.stop()


@pytest.mark.parametrize("claim", ["claim", "claim_many", "claim_limited"])
async def test_a_worker_behind_pgbouncer_claims_through_the_functions(
    fault_env: Env, bouncer_url: str, claim: str
) -> None:
    admin = await asyncpg.connect(fault_env.dsn)
    try:
        await admin.execute(f"ALTER DATABASE \"{fault_env.database}\" SET track_functions = 'pl'")
    finally:
        await admin.close()

    assert await drain_through(bouncer_url, claim=claim) == ["succeeded"] * POOLED_JOBS

    # the server counts the calls (an idle session reports its statistics within 10 s): the
    # worker's claim, alone or writing outcomes (claim_limited never writes them); of plain
    # jobs, no workflow step, in its plain form (claim_completing_plain, or
    # claim_completing_plain_many for a worker of more than MANY_QUEUES queues)
    form = {"claim": "claim_completing_plain", "claim_many": "claim_completing_plain_many"}.get(claim, claim)
    forms = {function_name(form)}
    for _ in range(200):
        calls = await function_calls(fault_env.dsn)
        claims = sum(n for fn, n in calls.items() if fn in forms)
        if claims:
            break
        await asyncio.sleep(0.1)
    assert claims >= 1, calls
    assert set(calls) <= {function_name(name) for name in POOLED}


async def test_without_the_functions_a_worker_behind_pgbouncer_runs_the_statements(
    fault_env: Env, bouncer_url: str
) -> None:
    admin = await asyncpg.connect(fault_env.dsn)
    try:
        for name in POOLED:
            await admin.execute(f"DROP FUNCTION {function_name(name)}")
    finally:
        await admin.close()
    assert await drain_through(bouncer_url) == ["succeeded"] * POOLED_JOBS
