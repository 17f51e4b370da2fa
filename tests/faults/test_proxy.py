"""One worker's connections cut (RST) or stalled through the suite's own TCP proxy."""

from __future__ import annotations

import pytest

from .scenarios import Env, connection_faults


@pytest.mark.timeout(300)
async def test_a_worker_survives_cut_and_stalled_connections(fault_env: Env) -> None:
    fig = await connection_faults(fault_env, jobs=500, seconds=24)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["P alive"]
    assert fig.extra["graceful exits"] == "0/0"
    assert fig.extra["cut: P claims again after (max s)"] != "never"
    assert fig.extra["stall: P claims again after (max s)"] != "never"


@pytest.mark.timeout(60)
async def test_a_claim_whose_reply_was_lost_still_runs_its_jobs(fault_env: Env, monkeypatch) -> None:
    """The claim commits and its reply is lost with the connection: the jobs are running under
    a worker that lives on and never heard of them. It must find and run them, not strand them
    (nobody rescues the jobs of a worker whose heartbeat is fine).

    Deterministic twin of what the cut scenario meets at random: the real claim runs, then
    the driver's error for a reset connection is raised instead of its reply."""
    import asyncio
    from datetime import timedelta

    from akadze.db.queries import Queries
    from akadze.worker import Worker

    from .app import build
    from .scenarios import fetchval, registered, wait_for

    real_claim = Queries.claim
    lost: list[int] = []

    async def claim_losing_the_reply(conn, queues, limit, worker_id):
        jobs = await real_claim(conn, queues, limit, worker_id)
        if jobs and not lost:
            lost.extend(job.id for job in jobs)
            raise ConnectionResetError("connection reset by peer (injected after the claim committed)")
        return jobs

    monkeypatch.setattr(Queries, "claim", staticmethod(claim_losing_the_reply))
    app, ledger = build(fault_env.url, fault_env.dsn)
    worker = Worker(
        app,
        queues=["faults"],
        slots=2,
        poll_interval=timedelta(milliseconds=200),
        heartbeat_interval=timedelta(seconds=1),
        lost_after=timedelta(seconds=30),
        listen=False,
    )
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await registered(fault_env.dsn, 1)
        job = await app.get_task("fault.work").enqueue(key="lost-reply", ms=0)

        async def succeeded() -> bool:
            return (
                await fetchval(fault_env.dsn, "SELECT state FROM akadze_jobs WHERE id = $1", job.id)
                == "succeeded"
            )

        assert await wait_for(succeeded, 10), "the job stayed running under a live worker"
        assert lost == [job.id]
        starts = await fetchval(fault_env.dsn, "SELECT count(*) FROM chk_exec WHERE job_id = $1", job.id)
        assert starts == 2  # start and end_ok of one run
    finally:
        worker.stop(now=True)
        await asyncio.wait_for(serving, 30)
        await ledger.close()
        await app.dispose()
