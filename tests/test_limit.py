"""Limits: the declaration checks (pure), and the claim holding jobs back in-process on a real
database: held jobs stay queued and spend nothing, other jobs still run, permits come back
when a job ends, is rescued or is put back. Multi-process and PgBouncer runs: tests/faults."""

from __future__ import annotations

import asyncio
import functools
import inspect
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest

from akadze import Akadze, JobState, Limit
from akadze.db.queries import Queries
from akadze.db.queries.runs import MANY_QUEUES
from akadze.db.sql import statement
from akadze.errors import ConfigError
from akadze.flow import arguments_of, check_limit, limit_params
from akadze.worker import Worker
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import execute, fetch, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


# -- declaration checks (pure) ----------------------------------------------------------------


def call(account: int, amount: float, tags: set[str], untyped, note: str = "") -> None:  # type: ignore[no-untyped-def]
    ...


PARAMS = arguments_of(call, inspect.signature(call))


class TestCheckLimit:
    def test_good_limits_pass(self) -> None:
        for limit in (
            Limit(concurrency=1),
            Limit(rate=10, per=timedelta(seconds=1)),
            Limit(concurrency=2, rate=1, per=timedelta(minutes=1), key="account"),
            Limit(concurrency=1, key="note"),
            Limit(key="account"),  # a fair share, no ceiling
        ):
            assert check_limit("t", limit, PARAMS) is limit
        assert check_limit("t", None, PARAMS) is None

    @pytest.mark.parametrize(
        ("limit", "words"),
        [
            (Limit(), ["concurrency=N", "key= alone", "fair share"]),
            (Limit(concurrency=0), ["concurrency", "1 or more"]),
            (Limit(concurrency=True), ["concurrency", "1 or more"]),
            (Limit(rate=0, per=timedelta(seconds=1)), ["rate", "1 or more"]),
            (Limit(rate=5), ["needs per="]),
            (Limit(concurrency=1, per=timedelta(seconds=1)), ["per=", "applies to rate="]),
            (Limit(rate=5, per=timedelta(0)), ["positive timedelta"]),
            (Limit(rate=5, per=5), ["positive timedelta"]),  # type: ignore[arg-type]
            (Limit(concurrency=1, key="acount"), ["'acount'", "does not take", "account"]),
            (Limit(concurrency=1, key="amount"), ["'amount'", "no stable JSON form", "float"]),
            (Limit(concurrency=1, key="tags"), ["'tags'", "no stable JSON form", "set"]),
            (Limit(concurrency=1, key="untyped"), ["'untyped'", "no stable JSON form"]),
        ],
        ids=[
            "empty",
            "zero-concurrency",
            "bool-concurrency",
            "zero-rate",
            "rate-without-per",
            "per-without-rate",
            "zero-per",
            "per-not-timedelta",
            "unknown-key",
            "float-key",
            "set-key",
            "untyped-key",
        ],
    )
    def test_bad_limits_are_one_config_error_naming_the_task(self, limit: Limit, words: list[str]) -> None:
        with pytest.raises(ConfigError) as caught:
            check_limit("api.call", limit, PARAMS)
        assert "task 'api.call'" in str(caught.value)
        for word in words:
            assert word in str(caught.value)

    def test_the_app_refuses_a_bad_limit_at_declaration(self) -> None:
        app = Akadze(database_url="postgresql://localhost/none")
        with pytest.raises(ConfigError, match=r"task 'api\.call'.*needs per="):

            @app.task("api.call", limit=Limit(rate=3))
            async def api_call(account: int) -> None: ...

        with pytest.raises(ConfigError, match=r"task 'sync'.*'nope'"):
            app.register(lambda account: None, name="sync", limit=Limit(concurrency=1, key="nope"))

    def test_limit_params_are_none_without_limits(self) -> None:
        assert limit_params({}) is None
        params = limit_params(
            {"b": Limit(concurrency=2), "a": Limit(rate=3, per=timedelta(milliseconds=500), key="k")}
        )
        assert params is not None
        assert params.tasks == ["a", "b"]
        assert params.keys == ["k", None]
        assert params.concurrency == [None, 2]
        assert params.rate == [3, None]
        assert params.per_s == [0.5, None]


# -- the claim, in-process ------------------------------------------------------------------


async def claim(
    database_url: str,
    limits: dict[str, Limit],
    limit: int = 10,
    worker: str | None = None,
    *,
    recheck_s: float = 0.0,
    freed: list[int] | None = None,
) -> list[Any]:
    """One limited claim. ``recheck_s`` 0: a full group is looked at again by the next claim
    (a worker waits its poll interval, unless it ended one of the group's jobs: ``freed``)."""
    import asyncpg

    params = limit_params(limits)
    assert params is not None
    conn = await asyncpg.connect(plain(database_url))
    try:
        jobs, _, _ = await Queries.claim_limited(
            conn,
            ["default"],
            limit,
            worker or str(uuid.uuid4()),
            params,
            freed=freed or [],
            recheck_s=recheck_s,
        )
        return jobs
    finally:
        await conn.close()


async def test_a_worker_without_limits_runs_the_plain_claim(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None: ...

    worker = Worker(app)
    assert worker.fetcher.claim is Queries.claim  # claim.sql, unchanged: nothing to pay

    @app.task("limited", limit=Limit(concurrency=1))
    async def limited() -> None: ...

    assert Worker(app).fetcher.claim is not Queries.claim


async def test_a_held_job_stays_queued_spends_nothing_and_other_jobs_still_run(
    app: Akadze, database_url: str
) -> None:
    release = asyncio.Event()
    running: set[str] = set()

    @app.task("limited", limit=Limit(concurrency=1))
    async def limited(n: int) -> None:
        running.add(f"limited-{n}")
        await release.wait()

    @app.task("free")
    async def free(n: int) -> None:
        running.add(f"free-{n}")
        await release.wait()

    # the held jobs come first in claim order: they must not keep the free ones out
    held = [await limited.using(priority=5).enqueue(n=n) for n in range(3)]
    for n in range(3):
        await free.enqueue(n=n)
    worker = Worker(app, slots=10, poll_interval=timedelta(milliseconds=50))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: len(running) == 4)
        await asyncio.sleep(0.3)  # a few more claims: still one limited job
        assert running == {"limited-0", "free-0", "free-1", "free-2"}
        rows = await fetch(
            database_url, "SELECT id, state, attempt, run FROM akadze_jobs WHERE task = 'limited' ORDER BY id"
        )
        assert [(r["state"], r["attempt"], r["run"]) for r in rows] == [
            ("running", 1, 1),
            ("queued", 0, 0),
            ("queued", 0, 0),
        ]
        assert [r["id"] for r in rows] == [job.id for job in held]
        release.set()
        await wait_until(lambda: len(running) == 6)
    finally:
        release.set()
        worker.stop()
        await serving
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'succeeded'") == 6


async def test_a_held_job_starts_once_the_job_before_it_is_written_not_at_the_next_poll(
    app: Akadze, database_url: str
) -> None:
    """The claim that held the second job came back short, so no claim follows by itself: the
    written end of the first wakes the fetcher (a poll would come 30 s later)."""
    started: list[float] = []

    @app.task("one", limit=Limit(concurrency=1))
    async def one() -> None:
        started.append(asyncio.get_running_loop().time())

    await one.enqueue()
    await one.enqueue()
    worker = Worker(app, slots=5, poll_interval=timedelta(seconds=30))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: len(started) == 2, timeout=10)
    finally:
        worker.stop()
        await serving
    assert started[1] - started[0] < 5


async def test_a_permit_comes_back_when_its_job_ends(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(concurrency=2))
    async def t() -> None: ...

    for _ in range(3):
        await t.enqueue()
    limits = {"t": Limit(concurrency=2)}
    first = await claim(database_url, limits)
    assert len(first) == 2
    assert await claim(database_url, limits) == []
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {first[0].id}")
    assert len(await claim(database_url, limits)) == 1


async def test_a_claim_that_does_not_see_the_groups_last_writer_keeps_to_its_count(
    app: Akadze, database_url: str
) -> None:
    """Past the cap, a claim counts the group's runs only when its snapshot sees the row's
    last writer; otherwise that writer's runs might be invisible to the count, and the row's
    upper bound stands (nothing more is granted this time)."""

    @app.task("t", limit=Limit(concurrency=1))
    async def t() -> None: ...

    await t.enqueue()
    await t.enqueue()
    limits = {"t": Limit(concurrency=1)}
    [first] = await claim(database_url, limits)
    await execute(database_url, f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id = {first.id}")
    # a writer no snapshot sees yet: a transaction id far ahead of every one assigned
    await execute(
        database_url,
        "UPDATE akadze_limit_groups SET taken_by = "
        "CAST(CAST(CAST(CAST(pg_current_xact_id() AS text) AS bigint) + 1000000 AS text) AS xid8)",
    )
    assert await claim(database_url, limits) == []
    assert await fetchval(database_url, "SELECT running FROM akadze_limit_groups") == 1
    # once the writer is seen, the runs are counted: none, so the job is claimed
    await execute(database_url, "UPDATE akadze_limit_groups SET taken_by = CAST('1' AS xid8)")
    assert len(await claim(database_url, limits)) == 1
    assert await fetchval(database_url, "SELECT running FROM akadze_limit_groups") == 1


async def test_a_rescued_job_gives_its_place_back(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(concurrency=1))
    async def t() -> None: ...

    await t.enqueue()
    await t.enqueue()
    limits = {"t": Limit(concurrency=1)}
    # claimed by a worker that never registered: as good as SIGKILLed, rescued at the next pass
    [lost] = await claim(database_url, limits)
    assert await claim(database_url, limits) == []
    written = await rescue_lost(app.engine)
    assert [w.id for w in written] == [lost.id]
    assert len(await claim(database_url, limits)) == 1


async def test_a_graceful_shutdown_gives_the_place_back(app: Akadze, database_url: str) -> None:
    started = asyncio.Event()

    @app.task("slow", limit=Limit(concurrency=1))
    async def slow() -> None:
        started.set()
        await asyncio.sleep(60)

    job = await slow.enqueue()
    worker = Worker(app, shutdown_timeout=timedelta(milliseconds=100))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(started.wait(), 10)
    worker.stop()
    await serving
    assert (await app.get_job(job.id)).state is JobState.QUEUED  # type: ignore[union-attr]
    assert [j.id for j in await claim(database_url, {"slow": Limit(concurrency=1)})] == [job.id]


async def test_per_key_limits_hold_each_key_apart(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(concurrency=1, key="account"))
    async def t(account: str | None = None) -> None: ...

    for account in ("a", "a", "b", "b"):
        await t.enqueue(account=account)
    await t.enqueue()  # no key: a group of its own
    limits = {"t": Limit(concurrency=1, key="account")}
    claimed = await claim(database_url, limits)
    assert sorted(str(job.args.get("account")) for job in claimed) == ["None", "a", "b"]
    assert await claim(database_url, limits) == []


async def test_a_rate_permit_is_spent_for_its_window(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(rate=2, per=timedelta(seconds=1)))
    async def t() -> None: ...

    for _ in range(5):
        await t.enqueue()
    limits = {"t": Limit(rate=2, per=timedelta(seconds=1))}
    assert len(await claim(database_url, limits)) == 2
    await execute(database_url, "UPDATE akadze_jobs SET state = 'succeeded' WHERE state = 'running'")
    assert await claim(database_url, limits) == []  # ended, but the window is not over
    # the window passes: the starts move a second back
    await execute(
        database_url,
        "UPDATE akadze_limit_groups SET starts = ARRAY(SELECT s - interval '1 s' FROM unnest(starts) AS s)",
    )
    assert len(await claim(database_url, limits)) == 2


async def test_a_cancelled_or_expired_job_of_a_full_limit_still_ends_at_claim(
    app: Akadze, database_url: str
) -> None:
    # declared without its Limit, as by a producer that does not know it: the jobs go to the
    # claim index, where the claim meets them (a producer that knows the Limit parks them)
    @app.task("t")
    async def t() -> None: ...

    await t.enqueue()
    doomed = await t.enqueue()
    await execute(database_url, f"UPDATE akadze_jobs SET cancel_requested = true WHERE id = {doomed.id}")
    claimed = await claim(database_url, {"t": Limit(concurrency=1)})
    assert sorted((job.id, job.state) for job in claimed)[-1] == (doomed.id, JobState.CANCELLED)
    assert len(claimed) == 2


async def test_racing_claims_never_grant_more_than_the_limit(app: Akadze, database_url: str) -> None:
    @app.task("t", limit=Limit(concurrency=3, key="k"))
    async def t(k: int) -> None: ...

    await t.enqueue_many([{"k": n % 2} for n in range(60)])
    limits = {"t": Limit(concurrency=3, key="k")}

    async def running() -> dict[str, int]:
        rows = await fetch(
            database_url,
            "SELECT args->>'k' AS k, count(*) AS n FROM akadze_jobs WHERE state = 'running' GROUP BY 1",
        )
        return {r["k"]: r["n"] for r in rows}

    for _ in range(5):
        await asyncio.gather(*(claim(database_url, limits, limit=2) for _ in range(8)))
        counts = await running()
        assert max(counts.values()) <= 3, counts
        # a claim that lost a race for a permit leaves its job queued: the next claim takes it
        while await claim(database_url, limits):
            pass
        assert await running() == {"0": 3, "1": 3}
        await execute(database_url, "UPDATE akadze_jobs SET state = 'succeeded' WHERE state = 'running'")


async def test_the_limited_claim_walks_the_claim_index(database_url: str) -> None:
    await execute(
        database_url,
        "INSERT INTO akadze_jobs (task, queue, args) "
        "SELECT CASE WHEN n % 2 = 0 THEN 'limited' ELSE 'other' END, 'default', "
        "jsonb_build_object('k', n % 100) "
        "FROM generate_series(1, 20000) AS n",
        "ANALYZE akadze_jobs",
    )
    params = limit_params({"limited": Limit(concurrency=1, key="k")})
    assert params is not None
    import asyncpg

    conn = await asyncpg.connect(plain(database_url))
    try:
        tx = conn.transaction()
        await tx.start()
        stmt = statement("claim_limited")
        values = {
            "queues": ["default"],
            "limit": 10,
            "worker_id": str(uuid.uuid4()),
            "l_task": params.tasks,
            "l_key": params.keys,
            "l_conc": params.concurrency,
            "l_rate": params.rate,
            "l_per": params.per_s,
            "scan": 10,
            "freed": [],
            "recheck_s": 1.0,
        }
        plan = "\n".join(
            row[0] for row in await conn.fetch("EXPLAIN " + stmt.pg, *[values[name] for name in stmt.params])
        )
        await tx.rollback()
    finally:
        await conn.close()
    assert "akadze_jobs_claim_idx" in plan, plan
    assert "Seq Scan on akadze_jobs" not in plan, plan


async def test_the_generic_plan_of_the_limited_claim_reads_only_indexes(database_url: str) -> None:
    """The plan a direct claim connection keeps (generic, planned on a table analyzed while
    nothing ran): the claim index, the group rows by key, the running jobs of a group through
    akadze_jobs_limit_idx and a due group's parked jobs through akadze_jobs_limit_parked_idx,
    even when they are most of the table; never a whole table, nor akadze_jobs_running_idx
    read whole."""
    await execute(
        database_url,
        "INSERT INTO akadze_jobs (task, queue, args) "
        "SELECT 'limited', 'default', jsonb_build_object('k', n % 100) FROM generate_series(1, 20000) AS n",
        "INSERT INTO akadze_limit_groups "
        "(grp, running, starts, started, granted, taken_by, taken_at, due_at) "
        "SELECT CAST(jsonb_build_array('limited', n) AS text), 1, '{}', '{}', 1, CAST('1' AS xid8), now(), "
        "CASE WHEN n = 1 THEN now() END "
        "FROM generate_series(0, 999) AS n",
        # a hot key's backlog, parked: most of the table, which must still be read by its index
        "INSERT INTO akadze_jobs (task, queue, args, parked, limit_grp) "
        "SELECT 'limited', 'default', '{\"k\": 1}', 'limit', '[\"limited\", 1]' "
        "FROM generate_series(1, 60000)",
        # and the arrival rows of jobs parked by their enqueue, one per enqueue statement
        "INSERT INTO akadze_limit_arrivals (queue, task, grp) "
        "SELECT 'default', 'limited', CAST(jsonb_build_array('limited', n % 100) AS text) "
        "FROM generate_series(1, 5000) AS n",
        "ANALYZE akadze_jobs",
        "ANALYZE akadze_limit_groups",
        "ANALYZE akadze_limit_arrivals",
    )
    stmt = statement("claim_limited")
    types = {
        "queues": "text[]",
        "limit": "integer",
        "worker_id": "text",
        "l_task": "text[]",
        "l_key": "text[]",
        "l_conc": "integer[]",
        "l_rate": "integer[]",
        "l_per": "double precision[]",
        "scan": "bigint",
        "freed": "bigint[]",
        "recheck_s": "double precision",
    }
    values = {
        "queues": "ARRAY['default']",
        "limit": "10",
        "worker_id": f"'{uuid.uuid4()}'",
        "l_task": "ARRAY['limited']",
        "l_key": "ARRAY['k']",
        "l_conc": "ARRAY[1]",
        "l_rate": "ARRAY[2]",
        "l_per": "ARRAY[1.0]",
        "scan": "10",
        "freed": "ARRAY[1, 2]",
        "recheck_s": "1.0",
    }
    import asyncpg

    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE c({', '.join(types[p] for p in stmt.params)}) AS {stmt.pg}")
        plan = "\n".join(
            row[0]
            for row in await conn.fetch(f"EXPLAIN EXECUTE c({', '.join(values[p] for p in stmt.params)})")
        )
    finally:
        await conn.close()
    assert "akadze_jobs_claim_idx" in plan, plan
    assert "akadze_jobs_limit_idx" in plan, plan
    assert "akadze_limit_groups_pkey" in plan, plan
    assert "akadze_jobs_limit_parked_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
    assert "akadze_jobs_running_idx" not in plan, plan


async def test_a_direct_claim_connection_plans_its_claim_once(app: Akadze, database_url: str) -> None:
    """Planning a claim costs about as much as running it: on a direct connection (where it is
    prepared) the session of each claim statement keeps the generic plan, with JIT off
    (generic_plans.sql); a connection that never claimed is left alone."""
    import asyncpg

    params = limit_params({"t": Limit(concurrency=1)})
    assert params is not None
    claims: dict[str, Callable[..., Awaitable[Any]]] = {
        "claim": functools.partial(Queries.claim, queues=["default"]),
        "claim_many": functools.partial(Queries.claim, queues=[f"q{n}" for n in range(MANY_QUEUES + 1)]),
        "claim_limited": functools.partial(Queries.claim_limited, queues=["default"], limits=params),
    }
    for name, claim in claims.items():
        conn = await asyncpg.connect(plain(database_url))
        try:
            assert await conn.fetchval("SHOW plan_cache_mode") == "auto", name
            await claim(conn, limit=1, worker_id=str(uuid.uuid4()))
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan", name
            assert await conn.fetchval("SHOW jit") == "off", name
        finally:
            await conn.close()


async def test_the_pruner_deletes_idle_limit_groups_and_keeps_a_group_that_runs(
    app: Akadze, database_url: str
) -> None:
    from akadze.worker.pruner import prune

    # the producer does not know the Limit: the claim takes the jobs from the claim index and
    # writes their groups' rows, none of which is then due
    @app.task("t")
    async def t(k: int) -> None: ...

    await t.enqueue_many([{"k": k} for k in range(3)])
    limits = {"t": Limit(concurrency=1, key="k")}
    claimed = await claim(database_url, limits)
    assert len(claimed) == 3
    # two of them ended long ago; the third still runs
    ended = [job.id for job in claimed if job.args["k"] != 2]
    await execute(
        database_url,
        f"UPDATE akadze_jobs SET state = 'succeeded' WHERE id IN ({', '.join(map(str, ended))})",
        "UPDATE akadze_limit_groups SET taken_at = now() - interval '30 days'",
    )
    pruned = await prune(app.engine, timedelta(days=7))
    assert pruned.limit_groups == 2
    left = await fetch(database_url, "SELECT grp FROM akadze_limit_groups")
    assert [r["grp"] for r in left] == ['["t", 2]']
