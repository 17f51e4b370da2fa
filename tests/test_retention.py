"""Retention: the pruner deletes exactly the old finished jobs and old schedule runs, in batches,
one pruner at a time, without waiting on rows that others hold."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import text

from akadze import Akadze
from akadze.db.locks import PRUNE
from akadze.worker import Worker
from akadze.worker.pruner import prune, pruner_service
from tests.conftest import wait_until

RETENTION = timedelta(days=7)

#: (label, state, finished this long ago or None): the rows every test starts with
ROWS = [
    ("old-succeeded", "succeeded", timedelta(days=8)),
    ("old-failed", "failed", timedelta(days=30)),
    ("old-cancelled", "cancelled", timedelta(days=7, minutes=1)),
    ("recent-succeeded", "succeeded", timedelta(days=6, hours=23)),
    ("recent-failed", "failed", timedelta(hours=1)),
    ("recent-cancelled", "cancelled", timedelta(seconds=5)),
    ("old-queued", "queued", None),
    ("old-running", "running", None),
]
OLD_FINISHED = {"old-succeeded", "old-failed", "old-cancelled"}


_SEED_JOBS = """
INSERT INTO akadze_jobs (task, queue, state, created_at, run_at, started_at, finished_at)
SELECT
    :label, 'seeded', :state, now() - interval '30 days', now() - interval '30 days',
    CASE WHEN :state = 'queued' THEN NULL ELSE now() - interval '30 days' END,
    now() - make_interval(secs => CAST(:age_s AS double precision))
FROM generate_series(1, :copies)
"""

_SEED_RUNS = """
INSERT INTO akadze_schedule_runs (schedule, fire_at, created_at)
SELECT :schedule, now() - make_interval(secs => :age_s + n), now() - make_interval(secs => :age_s)
FROM generate_series(1, :copies) AS n
"""


async def _seed(app: Akadze, *, copies: int = 1) -> None:
    """Jobs as labelled in ROWS, all created 30 days ago in a queue no worker serves, and
    schedule runs created 8 days and 1 hour ago."""
    async with app.engine.begin() as conn:
        for label, state, age in ROWS:
            age_s = age.total_seconds() if age is not None else None
            params = {"label": label, "state": state, "age_s": age_s, "copies": copies}
            await conn.execute(text(_SEED_JOBS), params)
        for schedule, run_age in (("old", timedelta(days=8)), ("recent", timedelta(hours=1))):
            params = {"schedule": schedule, "age_s": run_age.total_seconds(), "copies": copies}
            await conn.execute(text(_SEED_RUNS), params)


async def _left(app: Akadze) -> tuple[dict[str, int], dict[str, int]]:
    async with app.engine.connect() as conn:
        jobs = await conn.execute(text("SELECT task, count(*) FROM akadze_jobs GROUP BY task"))
        runs = await conn.execute(
            text("SELECT schedule, count(*) FROM akadze_schedule_runs GROUP BY schedule")
        )
        return {row[0]: row[1] for row in jobs}, {row[0]: row[1] for row in runs}


async def test_prune_deletes_exactly_the_old_finished_rows_in_batches(
    make_app: Callable[..., Akadze],
) -> None:
    app = make_app(retention=RETENTION)
    await _seed(app, copies=5)
    pruned = await prune(app.engine, app.retention, batch_size=4)
    assert (pruned.jobs, pruned.schedule_runs, pruned.yielded) == (15, 5, False)
    jobs, runs = await _left(app)
    assert jobs == {label: 5 for label, _, _ in ROWS if label not in OLD_FINISHED}
    assert runs == {"recent": 5}
    again = await prune(app.engine, app.retention, batch_size=4)
    assert (again.jobs, again.schedule_runs) == (0, 0)


async def test_retention_is_the_apps(make_app: Callable[..., Akadze]) -> None:
    app = make_app(grace=timedelta(seconds=1), retention=timedelta(minutes=30))
    await _seed(app)
    pruned = await prune(app.engine, app.retention)
    assert pruned.jobs == 5  # all but the one finished 5 s ago
    jobs, runs = await _left(app)
    assert set(jobs) == {"recent-cancelled", "old-queued", "old-running"}
    assert runs == {}


async def test_a_pruner_yields_to_one_already_pruning(make_app: Callable[..., Akadze]) -> None:
    app = make_app(retention=RETENTION)
    await _seed(app)
    async with app.engine.connect() as holder:
        assert await holder.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": PRUNE})
        pruned = await prune(app.engine, app.retention)
        assert (pruned.jobs, pruned.schedule_runs, pruned.yielded) == (0, 0, True)
        await holder.rollback()
    assert (await prune(app.engine, app.retention)).jobs == 3


async def test_prune_skips_rows_that_others_hold_instead_of_waiting(make_app: Callable[..., Akadze]) -> None:
    app = make_app(retention=RETENTION)
    await _seed(app)
    async with app.engine.connect() as holder:
        await holder.execute(text("SELECT id FROM akadze_jobs WHERE task = 'old-failed' FOR UPDATE"))
        pruned = await asyncio.wait_for(prune(app.engine, app.retention), timeout=5)
        assert pruned.jobs == 2
        await holder.rollback()
    jobs, _ = await _left(app)
    assert jobs["old-failed"] == 1


async def test_prune_leaves_no_lock_behind(make_app: Callable[..., Akadze]) -> None:
    # transaction-scoped locks only: nothing survives the batch (PgBouncer in transaction mode)
    app = make_app(retention=RETENTION)
    await _seed(app, copies=3)
    await prune(app.engine, app.retention, batch_size=2)
    async with app.engine.connect() as conn:
        held = await conn.scalar(text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"))
    assert held == 0


async def test_the_worker_prunes_while_serving(make_app: Callable[..., Akadze]) -> None:
    app = make_app(retention=RETENTION)

    @app.task("work")
    async def work() -> None:
        return None

    await _seed(app, copies=3)
    worker = Worker(app, listen=False, poll_interval=timedelta(milliseconds=100))
    # the pruner alone: the rescuer would take the seeded running jobs, whose worker never existed
    worker.services = [pruner_service(first_delay_s=0.0, interval_s=0.2, batch_size=2)]
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        job = await work.enqueue()

        async def pruned() -> bool:
            jobs, runs = await _left(app)
            return not OLD_FINISHED & set(jobs) and "old" not in runs

        await wait_until(pruned, timeout=10)
        done = await app.get_job(job.id)
        await wait_until(lambda: worker.runs >= 1, timeout=10)
    finally:
        worker.stop()
        await running
    jobs, runs = await _left(app)
    assert jobs == {label: 3 for label, _, _ in ROWS if label not in OLD_FINISHED} | {"work": 1}
    assert runs == {"recent": 3}
    assert done is not None


@pytest.mark.parametrize("name", ["prune_jobs", "prune_schedule_runs"])
def test_prune_statements_take_only_a_transaction_scoped_try_lock(name: str) -> None:
    from akadze.db.sql import statement

    source = statement(name).source
    assert "pg_try_advisory_xact_lock" in source
    assert "SKIP LOCKED" in source
    assert "pg_advisory_lock" not in source
