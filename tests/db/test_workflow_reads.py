"""The reads of a workflow's graph (workflow_steps.sql, waited_steps.sql): what they return for a
workflow, one with no step left and none at all, and that they stay on their indexes beside a
large table (EXPLAIN, not timed)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import asyncpg

from akadze import Akadze, Workflow
from akadze.db.queries import Queries
from akadze.db.sql import statement
from tests.support import plain

OTHER_JOBS = 200_000
FAN_OUT = 2_000


def build(app: Akadze) -> None:
    @app.task("album.resize")
    async def resize(n: int) -> None:
        return None


async def fan(app: Akadze, width: int) -> dict[str, Any]:
    resize = app.get_task("album.resize")
    wf = Workflow(name="album")
    wf.add("start", resize.bind(n=-1))
    for n in range(width):
        wf.add(f"resize-{n}", resize.bind(n=n), after=["start"])
    wf.add("album", resize.bind(n=-2), after=[f"resize-{n}" for n in range(width)])
    return await wf.enqueue()


async def test_a_workflow_reads_back_with_each_steps_parents_and_a_missing_one_reads_none(
    make_app: Callable[..., Akadze],
) -> None:
    app = make_app()
    build(app)
    steps = await fan(app, 3)
    workflow_id = steps["start"].workflow_id
    assert workflow_id is not None
    async with app.engine.connect() as conn:
        view = await Queries.workflow_steps(conn, workflow_id)
        assert await Queries.workflow_steps(conn, workflow_id + 1000) is None
        album = await Queries.waited_steps(conn, steps["album"].id, limit=2)
        start = await Queries.waited_steps(conn, steps["start"].id, limit=2)
        assert await Queries.waited_steps(conn, 10**12, limit=2) is None
    assert view is not None and (view.id, view.name) == (workflow_id, "album")
    assert [s.step for s in view.steps] == ["start", "resize-0", "resize-1", "resize-2", "album"]
    by_step = {s.step: s for s in view.steps}
    assert by_step["album"].after == ("resize-0", "resize-1", "resize-2")
    assert by_step["album"].after_ids == tuple(steps[f"resize-{n}"].id for n in range(3))
    assert (by_step["album"].waiting, by_step["album"].deps_left) == (True, 3)
    assert (by_step["start"].waiting, by_step["start"].after) == (False, ())
    assert view.counts() == {"waiting": 4, "queued": 1} and view.unfinished == 5
    # the first 2 of its 3 unfinished parents, and their count
    assert album is not None and (album.workflow_id, album.unfinished, album.deps_left) == (workflow_id, 3, 3)
    assert [(w.id, w.step) for w in album.steps] == [
        (steps[f"resize-{n}"].id, f"resize-{n}") for n in range(2)
    ]
    assert start is None  # not waiting for anything

    # a workflow whose steps are gone (pruned) still reads, with no step
    async with app.engine.begin() as conn:
        await conn.exec_driver_sql(f"DELETE FROM akadze_jobs WHERE workflow_id = {workflow_id}")
    async with app.engine.connect() as conn:
        empty = await Queries.workflow_steps(conn, workflow_id)
    assert empty is not None and empty.steps == () and empty.counts() == {}


async def test_the_reads_stay_on_their_indexes_beside_many_other_jobs(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()
    build(app)
    steps = await fan(app, FAN_OUT)
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue, state, attempt, run, finished_at) "
            f"SELECT 'bulk', 'default', 'succeeded', 1, 1, now() FROM generate_series(1, {OTHER_JOBS})"
        )
        await conn.execute(
            "INSERT INTO akadze_job_deps (parent_id, child_id) "
            f"SELECT n, n + 1 FROM generate_series(10000000, 10000000 + {OTHER_JOBS}) AS n"
        )
        # other workflows: their steps and rows must not be read
        await conn.execute(
            "INSERT INTO akadze_workflows (name) SELECT NULL FROM generate_series(1, 5000); "
            "UPDATE akadze_jobs SET workflow_id = 1000 + id % 3000, step = 's' || id "
            f"WHERE id IN (SELECT id FROM akadze_jobs WHERE task = 'bulk' LIMIT {OTHER_JOBS // 2})"
        )
        await conn.execute("ANALYZE akadze_jobs; ANALYZE akadze_job_deps; ANALYZE akadze_workflows")
        plans = {}
        for name, values in (
            ("workflow_steps", {"workflow_id": steps["start"].workflow_id}),
            ("waited_steps", {"id": steps["album"].id, "limit": 10}),
            ("get_workflow", {"workflow_id": steps["start"].workflow_id}),
        ):
            stmt = statement(name)
            found = await conn.fetchval(
                f"EXPLAIN (FORMAT JSON) {stmt.pg}", *[values[param] for param in stmt.params]
            )
            plans[name] = json.dumps(json.loads(found))
    finally:
        await conn.close()
    # searched for this workflow's steps, not every workflow's, filtered: its unfinished steps
    # and its finished ones, each through its index (migration 0017)
    for name in ("workflow_steps", "get_workflow"):
        for index in ("akadze_jobs_workflow_open_idx", "akadze_jobs_workflow_done_idx"):
            assert re.search(rf'"Index Name": "{index}"[^}}]*"Index Cond": "\(workflow_id = ', plans[name]), (
                name,
                index,
                plans[name],
            )
        assert '"Seq Scan"' not in plans[name], plans[name]
    assert "akadze_job_deps_child_idx" in plans["workflow_steps"], plans["workflow_steps"]
    assert '"Seq Scan"' not in plans["workflow_steps"]
    assert "akadze_job_deps_child_idx" in plans["waited_steps"], plans["waited_steps"]
    assert '"Seq Scan"' not in plans["waited_steps"]
