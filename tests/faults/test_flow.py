"""Flow control across worker processes, a SIGKILL and PgBouncer (transaction mode).

Overlaps are measured from the spans the tasks write (tests/apps/flow.py: start and end on the
database's clock, per run), not from what the queue says about itself.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.apps.flow import create_app

from . import pgbouncer
from .flow_chaos import all_done, max_overlap, prepare_spans, spans_of, workers
from .scenarios import Env, fetch, fetchval, wait_for


@pytest.mark.timeout(180)
async def test_a_concurrency_limit_of_two_holds_across_two_worker_processes(fault_env: Env) -> None:
    """One slot each, so the limit's two runs at once can only be one in each process."""
    await prepare_spans(fault_env.dsn)
    app = create_app(fault_env.url)
    try:
        await app.tasks["flow.two"].enqueue_many([{"n": n, "ms": 300} for n in range(20)])
    finally:
        await app.dispose()
    with workers(fault_env.url, fault_env.folder) as fleet:
        pids = {fleet.start("a", slots=1), fleet.start("b", slots=1)}
        await all_done(fault_env.dsn, 120)
    limited = await spans_of(fault_env.dsn, "flow.two")
    assert len(limited) == 20
    assert max_overlap([(r[0], r[1]) for r in limited]) == 2
    assert {r["pid"] for r in limited} == pids


@pytest.mark.timeout(180)
async def test_a_concurrency_limit_of_two_is_never_exceeded_by_two_workers_with_many_slots(
    fault_env: Env,
) -> None:
    """Eight slots between them and 24 jobs: never more than two at once, while another task's
    jobs run beside the held ones."""
    await prepare_spans(fault_env.dsn)
    app = create_app(fault_env.url)
    try:
        await app.tasks["flow.two"].enqueue_many([{"n": n, "ms": 300} for n in range(24)])
        await app.tasks["flow.free"].enqueue_many([{"n": n, "ms": 300} for n in range(8)])
    finally:
        await app.dispose()
    with workers(fault_env.url, fault_env.folder) as fleet:
        fleet.start("a")
        fleet.start("b")
        await all_done(fault_env.dsn, 120)
    limited = await spans_of(fault_env.dsn, "flow.two")
    assert len(limited) == 24
    assert max_overlap([(r[0], r[1]) for r in limited]) == 2
    free = await spans_of(fault_env.dsn, "flow.free")
    assert max_overlap([(r[0], r[1]) for r in free]) >= 3


@pytest.mark.timeout(180)
async def test_a_per_key_limit_keeps_one_keys_runs_apart_and_lets_two_keys_overlap(fault_env: Env) -> None:
    await prepare_spans(fault_env.dsn)
    app = create_app(fault_env.url)
    try:
        await app.tasks["flow.per_key"].enqueue_many(
            [{"account": account, "n": n} for n in range(10) for account in ("a", "b", "c")]
        )
    finally:
        await app.dispose()
    with workers(fault_env.url, fault_env.folder) as fleet:
        fleet.start("a")
        fleet.start("b")
        await all_done(fault_env.dsn, 120)
    everything = await spans_of(fault_env.dsn, "flow.per_key")
    assert len(everything) == 30
    for account in ("a", "b", "c"):
        one_key = await spans_of(fault_env.dsn, "flow.per_key", account)
        assert len(one_key) == 10
        assert max_overlap([(r[0], r[1]) for r in one_key]) == 1, account
    assert max_overlap([(r[0], r[1]) for r in everything]) >= 2


@pytest.mark.timeout(180)
async def test_a_rate_limit_holds_over_time_across_two_worker_processes(fault_env: Env) -> None:
    await prepare_spans(fault_env.dsn)
    app = create_app(fault_env.url)
    try:
        await app.tasks["flow.rate"].enqueue_many([{"n": n} for n in range(16)])
    finally:
        await app.dispose()
    with workers(fault_env.url, fault_env.folder) as fleet:
        fleet.start("a", poll=0.1)
        fleet.start("b", poll=0.1)
        await all_done(fault_env.dsn, 120)
    # started_at is the claim's clock, the one the permits are taken with
    starts = [
        r[0] for r in await fetch(fault_env.dsn, "SELECT started_at FROM akadze_jobs ORDER BY started_at")
    ]
    assert len(starts) == 16
    window = timedelta(seconds=1)
    busiest = max(sum(1 for other in starts if start <= other < start + window) for start in starts)
    assert busiest == 5
    assert starts[-1] - starts[0] >= timedelta(seconds=3)  # 16 starts at 5 per second


@pytest.mark.timeout(240)
async def test_a_sigkilled_worker_holds_the_limit_until_its_jobs_are_rescued_then_it_is_whole(
    fault_env: Env,
) -> None:
    await prepare_spans(fault_env.dsn)
    app = create_app(fault_env.url)
    two = app.tasks["flow.two"]
    try:
        await two.enqueue_many([{"n": n, "ms": 2500} for n in range(2)])
        with workers(fault_env.url, fault_env.folder) as fleet:
            victim = fleet.start("victim", slots=4)

            async def victim_holds_both() -> bool:
                return (
                    await fetchval(fault_env.dsn, "SELECT count(*) FROM flow_spans WHERE pid = $1", victim)
                    == 2
                )

            assert await wait_for(victim_holds_both, 60)
            await two.enqueue_many([{"n": n, "ms": 300} for n in range(2, 12)])
            fleet.kill("victim")
            killed_at = await fetchval(fault_env.dsn, "SELECT now()")
            survivor = fleet.start("survivor", slots=4)
            await all_done(fault_env.dsn, 120)
    finally:
        await app.dispose()
    # the killed runs held the limit until the rescue put their jobs back
    rescued_at = await fetchval(
        fault_env.dsn,
        "SELECT max((e->>'at')::timestamptz) FROM akadze_jobs, jsonb_array_elements(errors) AS e "
        "WHERE e->>'type' = 'akadze.WorkerLost'",
    )
    assert rescued_at is not None and rescued_at > killed_at
    after = await spans_of(fault_env.dsn, "flow.two", pids=[survivor])
    assert len(after) == 12  # the two rescued jobs ran again, with the ten others
    assert min(r[0] for r in after) >= rescued_at - timedelta(milliseconds=50)
    # and then the limit was whole again: two at a time, never more
    assert max_overlap([(r[0], r[1]) for r in after]) == 2


pytestmark_bouncer = pytest.mark.skipif(
    not pgbouncer.available(), reason="pgbouncer is not installed (apt-get install pgbouncer)"
)


@pytestmark_bouncer
@pytest.mark.timeout(240)
async def test_unique_jobs_and_limits_hold_through_pgbouncer_in_transaction_mode(fault_env: Env) -> None:
    assert fault_env.server is not None
    await prepare_spans(fault_env.dsn)
    bouncer = pgbouncer.PgBouncer(
        fault_env.folder / "pgbouncer", fault_env.server.host, fault_env.server.port, pool_size=4
    )
    port = await bouncer.start()
    url = fault_env.url_via(port)
    try:
        app = create_app(url)
        report = app.tasks["flow.report"]
        try:
            # 20 producers at once, through 4 server connections
            producers = [create_app(url) for _ in range(20)]
            try:
                jobs = await asyncio.gather(
                    *(p.tasks["flow.report"].enqueue(account=1, note=str(i)) for i, p in enumerate(producers))
                )
                batches = await asyncio.gather(
                    *(
                        p.tasks["flow.report"].enqueue_many([{"account": 2}, {"account": 3}, {"account": 2}])
                        for p in producers
                    )
                )
            finally:
                await asyncio.gather(*(p.dispose() for p in producers))
            assert len({job.id for job in jobs}) == 1 and sum(not job.duplicate for job in jobs) == 1
            assert len({job.id for batch in batches for job in batch}) == 2
            assert (
                await fetchval(fault_env.dsn, "SELECT count(*) FROM akadze_jobs WHERE task = 'flow.report'")
                == 3
            )
            await fetch(fault_env.dsn, "DELETE FROM akadze_jobs")
            await app.tasks["flow.two"].enqueue_many([{"n": n, "ms": 300} for n in range(16)])
            assert (await report.enqueue(account=4)).duplicate is False
        finally:
            await app.dispose()
        with workers(url, fault_env.folder) as fleet:
            fleet.start("a")
            fleet.start("b")
            await all_done(fault_env.dsn, 120)
        limited = await spans_of(fault_env.dsn, "flow.two")
        assert len(limited) == 16
        assert max_overlap([(r[0], r[1]) for r in limited]) == 2
    finally:
        await bouncer.stop()
