"""The app of the worker processes in tests/worker/test_faults.py.

The database comes from AKADZE_DATABASE_URL. The tests create the tables:
``marks`` (what each run did, from its own committed transactions), ``ledger`` (written
inside complete_tx) and ``once`` (a unique job id per run: a second run would violate it).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import time

from sqlalchemy import text

from akadze import Akadze, current
from akadze.errors import LostOwnershipError

app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL") or "postgresql://localhost/akadze_unset")

TABLES = (
    "CREATE TABLE marks (job_id bigint, run integer, pid integer, what text, at timestamptz DEFAULT now())",
    "CREATE TABLE ledger (job_id bigint, run integer, pid integer, UNIQUE (job_id, run))",
    "CREATE TABLE once (job_id bigint PRIMARY KEY, pid integer)",
)


async def mark(what: str) -> None:
    job = current().job
    async with app.engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO marks (job_id, run, pid, what) VALUES (:id, :run, :pid, :what)"),
            {"id": job.id, "run": job.run, "pid": os.getpid(), "what": what},
        )


@app.task("faults.hold")
async def hold(seconds: float) -> int:
    """Its first run holds for ``seconds``; every run marks its start and end. Returns the pid."""
    await mark("started")
    if current().job.run == 1:
        await asyncio.sleep(seconds)
    await mark("finished")
    return os.getpid()


@app.task("faults.step")
async def step(seconds: float) -> int:
    """Writes the ledger inside complete_tx; its first run holds inside the block."""
    ctx = current()
    await mark("started")
    try:
        async with ctx.complete_tx() as conn:
            await conn.execute(
                text("INSERT INTO ledger (job_id, run, pid) VALUES (:id, :run, :pid)"),
                {"id": ctx.job.id, "run": ctx.job.run, "pid": os.getpid()},
            )
            if ctx.job.run == 1:
                await mark("in block")
                await asyncio.sleep(seconds)
    except LostOwnershipError:
        await mark("fenced")
        raise
    return os.getpid()


@app.task("faults.once")
async def once(n: int) -> None:
    """Writes its job id, in its own transaction, where a second run would violate the key."""
    async with app.engine.connect() as conn:
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        # one autocommit statement: the ledger write commits before the job's outcome does
        await raw.execute("INSERT INTO once (job_id, pid) VALUES ($1, $2)", current().job.id, os.getpid())


@app.task("faults.block")
async def block(seconds: float) -> int:
    """Blocks the worker's event loop (a CPU-bound or badly written task)."""
    await mark("started")
    time.sleep(seconds)  # the point: the event loop is blocked
    return os.getpid()


@app.task("faults.gil")
async def gil(seconds: float) -> float:
    """Holds the GIL in one C call for ``seconds`` of wall time: libc's usleep called through
    ctypes.PyDLL, which keeps the GIL (as a C extension blocking without releasing it would),
    so no thread of the worker runs meanwhile. A hold of wall time, not of work: a fixed
    ``sum(range(n))`` lasted under 4 s on a fast or quiet machine, and one sized from a measure
    falls short when the machine is busier while it measures (tests/faults/gil.py). Returns the
    seconds the call held the GIL."""
    await mark("started")
    began = time.monotonic()
    ctypes.PyDLL(None).usleep(int(seconds * 1_000_000))
    return time.monotonic() - began
