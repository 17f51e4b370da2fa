"""Big graphs (issue 29, point 4) and fan-in under concurrency (point 3): a workflow's enqueue
sends the same statements at 100 and 10,000 steps; a step waits for 10,000 parents; parents
finishing together on several workers release their fan-in step exactly once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from sqlalchemy import event

from akadze import Akadze, Workflow
from akadze.worker import Worker
from tests.support import fetch, fetchval


def fan_in(step: Any, parents: int) -> Workflow:
    wf = Workflow(name=f"fan-in {parents}")
    names = [f"p{n}" for n in range(parents)]
    for name in names:
        wf.add(name, step.bind(name=name))
    wf.add("join", step.bind(name="join"), after=names)
    return wf


async def statements_of(app: Akadze, wf: Workflow) -> list[str]:
    sent: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement.split(None, 1)[0])

    event.listen(app.engine.sync_engine, "before_cursor_execute", count)
    try:
        await wf.enqueue()
    finally:
        event.remove(app.engine.sync_engine, "before_cursor_execute", count)
    return sent


async def test_enqueue_sends_the_same_statements_at_100_and_10000_steps(
    app: Akadze, database_url: str
) -> None:
    @app.task("wf.step")
    async def step(name: str) -> None:
        return None

    async with app.engine.connect():
        pass  # the engine's first connection reads the server's version: not the enqueue's
    small = await statements_of(app, fan_in(step, 99))
    big = await statements_of(app, fan_in(step, 9_999))
    assert small == big == ["WITH"]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 10_100
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_job_deps") == 99 + 9_999


async def burst(app: Akadze, **options: Any) -> int:
    worker = Worker(
        app,
        poll_interval=timedelta(milliseconds=100),
        heartbeat_interval=timedelta(seconds=5),
        lost_after=timedelta(seconds=30),
        listen=False,
        **options,
    )
    return await worker.run(burst=True, handle_signals=False)


async def test_a_step_waits_for_10000_parents_finishing_on_three_workers_and_runs_once(
    app: Akadze, database_url: str
) -> None:
    ran: list[str] = []

    @app.task("wf.step")
    async def step(name: str) -> None:
        if name == "join":
            ran.append(name)
        await asyncio.sleep(0)

    jobs = await fan_in(step, 10_000).enqueue()
    join = jobs["join"]
    # three workers at once, each finishing batches of parents in its own statements
    runs = await asyncio.gather(*(burst(app, slots=50) for _ in range(3)))
    # the last parent's batch released the join: a worker still running ran it, or this one does
    late = await burst(app, slots=1)
    assert sum(runs) + late == 10_001
    assert ran == ["join"]
    rows = await fetch(
        database_url, "SELECT state, deps_left, parked, attempt, run FROM akadze_jobs WHERE id = $1", join.id
    )
    assert tuple(rows[0]) == ("succeeded", 0, None, 1, 1)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state <> 'succeeded'") == 0


async def test_fan_in_steps_finishing_together_are_released_exactly_once(
    app: Akadze, database_url: str
) -> None:
    """Many small fan-ins whose parents all end in the same instant on several workers: each
    join runs once, with its counter at 0 and its first run."""
    rounds = 5
    ran: list[str] = []
    gate = asyncio.Event()

    @app.task("wf.step")
    async def step(name: str) -> None:
        if name.startswith("join"):
            ran.append(name)
            return
        await gate.wait()  # every parent holds its slot until all are running

    for n in range(rounds):
        wf = Workflow()
        names = [f"p{i}" for i in range(40)]
        for name in names:
            wf.add(name, step.bind(name=name))
        wf.add("join", step.bind(name=f"join{n}"), after=names)
        await wf.enqueue()

    async def open_when_all_run() -> None:
        while (
            await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'running'")
            < 40 * rounds
        ):
            await asyncio.sleep(0.05)
        gate.set()

    await asyncio.gather(open_when_all_run(), *(burst(app, slots=50) for _ in range(4)))
    await burst(app, slots=10)  # the joins released after the last worker's last claim
    assert sorted(ran) == [f"join{n}" for n in range(rounds)]
    rows = await fetch(
        database_url, "SELECT deps_left, attempt, run, state FROM akadze_jobs WHERE step = 'join'"
    )
    assert [tuple(r) for r in rows] == [(0, 1, 1, "succeeded")] * rounds
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state <> 'succeeded'") == 0
