"""Reads from a streaming replica (issue 30, point 3): with ``read_database_url``, job listings,
``jobs show``/``explain``, ``workflows show``, ``queues list``, ``workers list``, the dashboard's
pages and the metrics gauges read from the replica; actions and every other write go to the primary.

A real standby (replication.Pair) makes it plain: a write sent to it fails ("cannot execute
... in a read-only transaction"), so none can hide; with its replay paused, a job committed on
the primary is missing from every read that goes to the replica, and an action on that job
still applies (it went to the primary). Once replay resumes, the replica shows it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from akadze import Akadze, Workflow
from akadze.cli import app as cli
from akadze.db.errors import sqlstate
from akadze.events.metrics import serve_worker_metrics
from akadze.testing import drain
from akadze.web import create_app
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.test_metrics import samples, scrape, value
from tests.web.conftest import client_for, token

from . import replication
from .replication import Pair, execute, fetch, running_pair


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    reason = replication.skip_or_fail()
    if reason is not None:
        pytest.skip(reason)
    async with running_pair(synchronous=False, prefix="akadze-replica-") as servers:
        yield servers


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env={"AKADZE_APP": "", "AKADZE_DATABASE_URL": ""})
    return result.exit_code, result.output


@pytest.mark.timeout(180)
async def test_reads_go_to_the_replica_and_every_write_to_the_primary(pair: Pair) -> None:
    primary_url = pair.url("akadze")
    # the replica by a multi-host URL too: whichever server is a standby
    replica_url = pair.url("akadze", query="target_session_attrs=standby")
    app = Akadze(database_url=primary_url, read_database_url=replica_url)
    await app.migrate()

    @app.task("rr.ok", queue="rr")
    async def ok(n: int) -> int:
        return n

    @app.task("rr.step", queue="rr-steps")  # no worker serves it: the steps stay queued
    async def step(n: int) -> None:
        return None

    @app.task("rr.fail", queue="rr", max_attempts=1)
    async def broken() -> None:
        raise RuntimeError("broken on purpose")

    done = [await ok.enqueue(n=n) for n in range(3)]
    await broken.enqueue()
    await drain(app, queues=["rr"])
    worker = Worker(app, queues=["rr"], poll_interval=timedelta(seconds=0.2))
    running = asyncio.create_task(worker.run(handle_signals=False))
    server = serve_worker_metrics(worker, port=0, registry=CollectorRegistry(), queue_interval_s=0.0)
    server.queues.cost_factor = 0.0  # read at every scrape
    try:
        await wait_until(lambda: _registered(pair), timeout=20)
        await wait_until(lambda: worker.serving, timeout=20)  # /metrics answers 503 until then
        await pair.wait_replayed()
        # a write sent to the replica fails loudly
        with pytest.raises(DBAPIError) as refused:
            async with app.read_engine.begin() as conn:
                await conn.execute(text("UPDATE akadze_jobs SET priority = 1"))
        assert sqlstate(refused.value) == "25006"  # read_only_sql_transaction

        await execute(pair.standby.dsn(), "SELECT pg_wal_replay_pause()")
        fresh = await ok.using(delay=timedelta(hours=1)).enqueue(n=99)  # on the primary only
        flow = await Workflow().add("a", step.bind(n=1)).add("b", step.bind(n=2), after=["a"]).enqueue()
        flow_id = str(flow["a"].workflow_id)
        assert await app.get_job(fresh.id) is not None  # the app's own reads: the primary

        found = samples(await scrape(server.port))
        assert value(found, "akadze_queue_jobs", queue="rr", state="delayed") == 0  # the replica's

        urls = ("--database-url", primary_url, "--read-database-url", replica_url)
        code, out = await asyncio.to_thread(cli_run, "jobs", "list", *urls, "--output", "json")
        assert code == 0, out
        assert f'"id":{done[0].id},' in out and f'"id":{fresh.id},' not in out
        for command in ("show", "explain"):
            code, out = await asyncio.to_thread(cli_run, "jobs", command, str(fresh.id), *urls)
            assert (code, out.strip()) == (1, f"job {fresh.id} does not exist"), command
        code, out = await asyncio.to_thread(cli_run, "jobs", "explain", str(done[0].id), *urls)
        assert code == 0 and "succeeded" in out, out
        code, out = await asyncio.to_thread(cli_run, "queues", "list", *urls, "--output", "json")
        assert code == 0 and '"delayed":0' in out, out
        code, out = await asyncio.to_thread(cli_run, "workers", "list", *urls, "--output", "json")
        assert code == 0 and worker.id in out, out

        code, out = await asyncio.to_thread(cli_run, "workflows", "show", flow_id, *urls)
        assert (code, out.strip()) == (1, f"workflow {flow_id} does not exist"), out
        async with client_for(create_app(app)) as web:
            assert (await web.get(f"/workflows/{flow_id}")).status_code == 404
            listed = await web.get("/jobs")
            assert listed.status_code == 200
            assert f"/jobs/{done[0].id}" in listed.text and f"/jobs/{fresh.id}" not in listed.text
            assert (await web.get(f"/jobs/{fresh.id}")).status_code == 404
            for page in ("/", "/queues", "/workers", "/schedules", f"/jobs/{done[0].id}"):
                assert (await web.get(page)).status_code == 200, page
            # an action goes to the primary, where the job is
            form = {"csrf_token": await token(web)}
            cancelled = await web.post(f"/jobs/{fresh.id}/cancel", data=form)
            assert cancelled.status_code == 303, cancelled.text
            # refused the second time, it says the state the action met: the primary's
            again = await web.post(f"/jobs/{fresh.id}/cancel", data=form)
            assert again.status_code == 409 and f"job {fresh.id} was cancelled" in again.text, again.text

        # a write from the command line goes to the primary
        code, out = await asyncio.to_thread(cli_run, "queues", "pause", "rr", "--database-url", primary_url)
        assert code == 0, out
        code, out = await asyncio.to_thread(
            cli_run, "workflows", "cancel", flow_id, "--database-url", primary_url
        )
        assert code == 0, out

        await execute(pair.standby.dsn(), "SELECT pg_wal_replay_resume()")
        await pair.wait_replayed()
        code, out = await asyncio.to_thread(cli_run, "jobs", "show", str(fresh.id), *urls)
        assert code == 0 and "cancelled" in out, out
        code, out = await asyncio.to_thread(cli_run, "workflows", "show", flow_id, *urls, "--output", "json")
        assert code == 0 and '"counts":{"cancelled":2}' in out, out
        assert value(samples(await scrape(server.port)), "akadze_queue_paused", queue="rr") == 1
    finally:
        server.close()
        worker.stop()
        await running
        await app.dispose()


async def _registered(pair: Pair) -> bool:
    rows = await fetch(pair.primary_dsn("akadze"), "SELECT count(*) AS n FROM akadze_workers")
    return bool(rows[0]["n"])
