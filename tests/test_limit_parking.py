"""Held jobs are parked (issue 32): a job a full limit holds back leaves the claim index, so
however many are held the claim reads only the ready jobs and a few parked ones per group with
room; a parked job is taken once its group has room, in claim order; keys are served in turn,
with or without a ceiling (``Limit(key=...)`` alone is a fair share); the limited claim walks
priorities. Buffers are counted with EXPLAIN (ANALYZE, BUFFERS): they do not depend on the
machine's load, so the bounds below are not timings."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from akadze import Akadze, Limit
from akadze.db.queries import Queries
from akadze.db.sql import statement
from akadze.flow import limit_params
from tests.support import execute, fetch, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def claim(
    database_url: str,
    limits: dict[str, Limit],
    limit: int = 10,
    *,
    scan: int | None = None,
    freed: list[int] | None = None,
    recheck_s: float = 0.0,
    queues: tuple[str, ...] = ("default",),
) -> tuple[list[Any], bool]:
    """One limited claim of ``queues``: the jobs, and whether it parked jobs."""
    import asyncpg

    params = limit_params(limits)
    assert params is not None
    conn = await asyncpg.connect(plain(database_url))
    try:
        jobs, _, parked = await Queries.claim_limited(
            conn,
            list(queues),
            limit,
            str(uuid.uuid4()),
            params,
            scan=scan,
            freed=freed or [],
            recheck_s=recheck_s,
        )
        return jobs, parked
    finally:
        await conn.close()


async def park_all(database_url: str, limits: dict[str, Limit], limit: int = 10) -> list[Any]:
    """Claim as a worker does after a claim that parked: again at once, reading further, until
    a claim parks nothing. Returns every job claimed on the way."""
    taken: list[Any] = []
    more = True
    while more:
        jobs, more = await claim(database_url, limits, limit, scan=limit + 1000, recheck_s=60)
        taken += jobs
    return taken


async def claim_buffers(database_url: str, limits: dict[str, Limit], limit: int = 10) -> int:
    """Shared buffers a limited claim touches (EXPLAIN ANALYZE, rolled back)."""
    import asyncpg

    params = limit_params(limits)
    assert params is not None
    stmt = statement("claim_limited")
    values = {
        "queues": ["default"],
        "limit": limit,
        "worker_id": str(uuid.uuid4()),
        "l_task": params.tasks,
        "l_key": params.keys,
        "l_conc": params.concurrency,
        "l_rate": params.rate,
        "l_per": params.per_s,
        "scan": limit,
        "freed": [],
        "recheck_s": 60.0,
    }
    conn = await asyncpg.connect(plain(database_url))
    try:
        tx = conn.transaction()
        await tx.start()
        raw = await conn.fetchval(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + stmt.pg, *[values[name] for name in stmt.params]
        )
        await tx.rollback()
    finally:
        await conn.close()
    top = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


async def test_held_jobs_are_parked_and_leave_the_claim_index(app: Akadze, database_url: str) -> None:
    # declared without its Limit, as by a producer that does not know it: its jobs enter the
    # claim index, and the claim that meets them parks them
    @app.task("one")
    async def one(n: int) -> None: ...

    @app.task("free")
    async def free(n: int) -> None: ...

    await one.enqueue_many([{"n": n} for n in range(300)])
    await free.enqueue_many([{"n": n} for n in range(5)])  # behind the held ones
    limits = {"one": Limit(concurrency=1)}
    first, more = await claim(database_url, limits, 10)
    assert [job.task for job in first] == ["one"]
    assert more  # it parked the nine others it read: jobs may be ready behind them
    taken = first + await park_all(database_url, limits)
    assert sorted(job.task for job in taken) == ["free"] * 5 + ["one"]
    rows = await fetch(
        database_url,
        "SELECT parked, limit_grp, count(*) AS n FROM akadze_jobs WHERE state = 'queued' GROUP BY 1, 2",
    )
    assert [(r["parked"], r["limit_grp"], r["n"]) for r in rows] == [("limit", '["one", null]', 299)]
    # held, not touched: no attempt spent, no run counted
    assert (
        await fetchval(
            database_url,
            "SELECT count(*) FROM akadze_jobs WHERE parked = 'limit' AND (attempt, run) <> (0, 0)",
        )
        == 0
    )


async def test_an_idle_claim_reads_a_bounded_number_of_buffers_whatever_the_held_count(
    app: Akadze, database_url: str
) -> None:
    """Before parking, each claim walked past every held job (issue 32: 3,812 buffers for
    100,000); now the held jobs are not in the index it reads."""

    @app.task("one", limit=Limit(concurrency=1, key="k"))
    async def one(k: str, n: int) -> None: ...

    limits = {"one": Limit(concurrency=1, key="k")}
    await one.enqueue_many([{"k": "hot", "n": n} for n in range(3000)])
    await park_all(database_url, limits)
    await execute(database_url, "VACUUM ANALYZE akadze_jobs")
    few = await claim_buffers(database_url, limits)
    await one.enqueue_many([{"k": "hot", "n": n} for n in range(3000, 30000)])
    await park_all(database_url, limits)
    await execute(database_url, "VACUUM ANALYZE akadze_jobs")
    many = await claim_buffers(database_url, limits)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE parked = 'limit'") == 29999
    assert many < 100, (few, many)
    assert many <= few + 10, (few, many)


async def test_a_parked_job_is_taken_once_its_group_has_room_in_claim_order(
    app: Akadze, database_url: str
) -> None:
    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None: ...

    jobs = await one.enqueue_many([{"n": n} for n in range(4)])
    limits = {"one": Limit(concurrency=1)}
    [first] = await park_all(database_url, limits)
    assert first.id == jobs[0].id
    # full: the next claims look at the group again only after the recheck...
    assert (await claim(database_url, limits, recheck_s=60))[0] == []
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {first.id}")
    assert (await claim(database_url, limits, recheck_s=60))[0] == []
    # ...or at once when the claiming worker ended one of its jobs
    [second], _ = await claim(database_url, limits, freed=[first.id], recheck_s=60)
    assert second.id == jobs[1].id
    assert second.args == {"n": 1}
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {second.id}")
    # an end written elsewhere (another worker, a rescue) is found by the recheck
    await execute(database_url, "UPDATE akadze_limit_groups SET due_at = now()")
    [third], _ = await claim(database_url, limits, recheck_s=60)
    assert third.id == jobs[2].id


async def test_a_group_with_no_parked_job_left_is_no_longer_due(app: Akadze, database_url: str) -> None:
    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None: ...

    await one.enqueue_many([{"n": n} for n in range(2)])
    limits = {"one": Limit(concurrency=1)}
    [first] = await park_all(database_url, limits)
    assert await fetchval(database_url, "SELECT due_at IS NOT NULL FROM akadze_limit_groups")
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {first.id}")
    [second], _ = await claim(database_url, limits, freed=[first.id])
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {second.id}")
    assert (await claim(database_url, limits, freed=[second.id]))[0] == []
    assert await fetchval(database_url, "SELECT due_at FROM akadze_limit_groups") is None


@pytest.mark.parametrize(
    "limit", [Limit(concurrency=2, key="k"), Limit(key="k")], ids=["keyed-ceiling", "fair-share"]
)
async def test_a_key_with_one_job_starts_at_the_next_claim_behind_a_keys_backlog(
    app: Akadze, database_url: str, limit: Limit
) -> None:
    @app.task("t", limit=limit)
    async def t(k: str, n: int) -> None: ...

    limits = {"t": limit}
    await t.enqueue_many([{"k": "hot", "n": n} for n in range(2000)])
    await park_all(database_url, limits)
    small = await t.enqueue(k="small", n=0)
    jobs, _ = await claim(database_url, limits, 5, recheck_s=60)
    assert small.id in {job.id for job in jobs}


async def test_keys_of_a_fair_share_are_served_in_turn(app: Akadze, database_url: str) -> None:
    """Round robin: once the backlogs are parked, each claim of three takes one job of each
    of three keys, whatever their backlogs and the order they were enqueued in."""

    @app.task("t", limit=Limit(key="k"))
    async def t(k: str, n: int) -> None: ...

    limits = {"t": Limit(key="k")}
    await t.enqueue_many(
        [{"k": k, "n": n} for k, size in (("a", 300), ("b", 30), ("c", 12)) for n in range(size)]
    )
    await park_all(database_url, limits, 3)
    seen: list[list[str]] = []
    for _ in range(3):
        jobs, _ = await claim(database_url, limits, 3)
        seen.append(sorted(job.args["k"] for job in jobs))
    assert seen[-2:] == [["a", "b", "c"], ["a", "b", "c"]], seen
    # within a key, claim order
    ns = [
        r["n"]
        for r in await fetch(
            database_url,
            "SELECT (args->>'n')::int AS n FROM akadze_jobs "
            "WHERE state = 'running' AND args->>'k' = 'c' ORDER BY started_at, id",
        )
    ]
    assert ns == sorted(ns)


async def test_a_fair_share_has_no_ceiling(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(key="k"))
    async def t(k: str, n: int) -> None: ...

    await t.enqueue_many([{"k": "only", "n": n} for n in range(40)])
    claimed = await park_all(database_url, {"t": Limit(key="k")}, 20)
    while True:
        jobs, _ = await claim(database_url, {"t": Limit(key="k")}, 20)
        if not jobs:
            break
        claimed += jobs
    assert len(claimed) == 40
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'running'") == 40


async def test_the_limited_claim_walks_priorities_past_delayed_jobs(app: Akadze, database_url: str) -> None:
    """Delayed jobs at a priority above the ready ones are never read (issue 32, point 4)."""

    @app.task("one", limit=Limit(concurrency=1))
    async def one() -> None: ...

    limits = {"one": Limit(concurrency=1)}
    await execute(
        database_url,
        "INSERT INTO akadze_jobs (task, queue, priority, run_at, args) "
        "SELECT 'other', 'default', 1, now() + interval '1 hour', '{}' FROM generate_series(1, 100000)",
        "INSERT INTO akadze_jobs (task, queue, args) "
        "SELECT 'other', 'default', '{}' FROM generate_series(1, 5)",
        "VACUUM ANALYZE akadze_jobs",
    )
    buffers = await claim_buffers(database_url, limits)
    jobs, _ = await claim(database_url, limits)
    assert len(jobs) == 5
    assert buffers < 300, buffers


async def test_a_producer_that_knows_the_limit_parks_its_jobs_so_a_backlog_never_enters_the_claim_index(
    app: Akadze, database_url: str
) -> None:
    """A backlog enqueued at once ahead of ordinary jobs: parked by its enqueue, so the first
    claim takes the ordinary jobs behind it (a claim that had to park it would take only the
    backlog's first job and read it a thousand at a time before reaching them)."""

    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None: ...

    @app.task("free")
    async def free(n: int) -> None: ...

    await one.enqueue_many([{"n": n} for n in range(3000)])
    await free.enqueue_many([{"n": n} for n in range(5)])  # behind the held ones
    limits = {"one": Limit(concurrency=1)}
    first, _ = await claim(database_url, limits, 10)
    assert sorted(job.task for job in first) == ["free"] * 5 + ["one"]
    rows = await fetch(
        database_url,
        "SELECT parked, limit_grp, count(*) AS n FROM akadze_jobs WHERE state = 'queued' GROUP BY 1, 2",
    )
    assert [(r["parked"], r["limit_grp"], r["n"]) for r in rows] == [("limit", '["one", null]', 2999)]
    # the claim read the batch's one arrival row and deleted it; the group stays due (full)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_limit_arrivals") == 0
    assert await fetchval(database_url, "SELECT due_at IS NOT NULL FROM akadze_limit_groups") is True


async def test_a_key_with_one_job_parked_at_enqueue_starts_at_the_next_claim_behind_a_hot_key(
    app: Akadze, database_url: str
) -> None:
    @app.task("t", limit=Limit(concurrency=1, key="k"))
    async def t(k: str, n: int) -> None: ...

    for n in range(200):  # one by one: an arrival row each
        await t.enqueue(k="hot", n=n)
    await t.enqueue(k="small", n=0)
    limits = {"t": Limit(concurrency=1, key="k")}
    first, _ = await claim(database_url, limits, 10)
    assert sorted(job.args["k"] for job in first) == ["hot", "small"]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_limit_arrivals") == 0


async def test_jobs_parked_at_enqueue_all_run_one_at_a_time_under_their_limit(
    app: Akadze, database_url: str
) -> None:
    """Each parked job is taken once its group has room, never two at once, none left behind;
    a delayed job of the task is not parked and not taken before it is due."""
    from datetime import timedelta

    @app.task("one", limit=Limit(concurrency=1))
    async def one(n: int) -> None: ...

    await one.enqueue_many([{"n": n} for n in range(20)])
    later = await one.using(delay=timedelta(hours=1)).enqueue(n=99)
    assert await fetchval(database_url, f"SELECT parked FROM akadze_jobs WHERE id = {later.id}") is None
    limits = {"one": Limit(concurrency=1)}
    seen: list[int] = []
    for _ in range(60):
        jobs, _ = await claim(database_url, limits, 10)
        assert len(jobs) <= 1
        if jobs:
            seen.append(jobs[0].args["n"])
            await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {jobs[0].id}")
    assert seen == list(range(20))
    assert await fetchval(database_url, f"SELECT state FROM akadze_jobs WHERE id = {later.id}") == "queued"


async def test_a_generated_client_parks_a_limited_tasks_job_in_the_group_the_claim_uses(
    database_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest's Limit travels into the generated client, whose enqueue parks the job in
    the group the worker's claim computes (the key's stored JSON), and the claim takes it."""
    import importlib
    import sys

    import akadze.client
    from akadze_codegen import generate

    generate("tests.apps.flow:app", tmp_path / "flow_parked_client")
    monkeypatch.syspath_prepend(str(tmp_path))
    clients = importlib.import_module("flow_parked_client")
    akadze.client.configure(database_url=database_url)
    try:
        assert clients.flow_per_key.limit == Limit(concurrency=1, key="account")
        job = await clients.flow_per_key.enqueue(account="a-1", n=1)
        free = await clients.flow_free.enqueue(n=2)
    finally:
        await akadze.client.dispose()
        sys.modules.pop("flow_parked_client", None)
    rows = await fetch(database_url, "SELECT id, parked, limit_grp FROM akadze_jobs ORDER BY id")
    assert [(r["id"], r["parked"], r["limit_grp"]) for r in rows] == [
        (job.id, "limit", '["flow.per_key", "a-1"]'),
        (free.id, None, None),
    ]
    jobs, _ = await claim(
        database_url, {"flow.per_key": Limit(concurrency=1, key="account")}, queues=("flow",)
    )
    assert sorted(j.id for j in jobs) == [job.id, free.id]


async def test_a_job_parked_by_an_enqueue_that_commits_after_a_claim_began_is_taken_by_the_next(
    app: Akadze, database_url: str
) -> None:
    """The handshake: the arrival row commits with its job, so a claim that does not see the job
    leaves its row for the next claim, even when the claim looked at the group and found it
    emptied (its own snapshot cannot see the uncommitted job)."""

    @app.task("two", limit=Limit(concurrency=2))
    async def two(n: int) -> None: ...

    limits = {"two": Limit(concurrency=2)}
    await two.enqueue(n=1)
    async with app.engine.connect() as conn:
        late = await two.using(session=conn).enqueue(n=2)  # not committed yet
        first, _ = await claim(database_url, limits, 10)
        assert [job.args["n"] for job in first] == [1]
        await conn.commit()
    assert await fetchval(database_url, f"SELECT parked FROM akadze_jobs WHERE id = {late.id}") == "limit"
    second, _ = await claim(database_url, limits, 10)
    assert [job.id for job in second] == [late.id]
