"""`jobs explain` without the app does not call a job its Limit holds "ready" (issue 33): a job
a claim parked (parked = 'limit') is held, visibly, and a job not parked is ready only "unless a
Limit of its task holds it", since the task's limits are in the app's code."""

from __future__ import annotations

import asyncio

from typer.testing import CliRunner

from akadze import Akadze, Limit
from akadze.cli import app as cli
from akadze.control.explain import explain
from tests.cli.test_observe_explain import NOW, SERVING, codes, job
from tests.support import fetch


def test_a_parked_job_is_held_by_its_limit_without_the_app() -> None:
    found = explain(
        job(), now=NOW, paused_at=None, live=SERVING, workers=[], parked="limit", limits_known=False
    )
    assert codes(found) == ["held_by_limit"]
    assert found.reasons[0].message == (
        "held by its limit: parked (by its enqueue, or by a claim that found its group full); it "
        "starts when a limited claim finds room in its group (pass --app to name the limit and the "
        "jobs filling it)"
    )


def test_a_job_not_parked_is_ready_unless_a_limit_it_cannot_see_holds_it() -> None:
    found = explain(job(), now=NOW, paused_at=None, live=SERVING, workers=[], limits_known=False)
    assert codes(found) == ["ready"]
    assert found.reasons[0].message.endswith(
        "unless a Limit of its task holds it, which is not known without the app (pass --app to check)"
    )
    known = explain(job(), now=NOW, paused_at=None, live=SERVING, workers=[], limits_known=True)
    assert "unless" not in known.reasons[0].message


def test_a_parked_job_whose_limit_has_room_says_when_it_is_taken() -> None:
    found = explain(job(), now=NOW, paused_at=None, live=SERVING, workers=[], parked="limit")
    assert codes(found) == ["held_by_limit"]
    assert found.reasons[0].message.startswith("parked by its limit, which does not hold it now")


async def test_explain_reads_the_parked_column_without_the_app(database_url: str) -> None:
    async with Akadze(database_url) as app:
        task = app.task("shop.sync", limit=Limit(concurrency=1))(lambda account: None)
        held = (await task.enqueue(account="a")).id
    # what a claim that found the group full writes (claim_limited.sql)
    await fetch(database_url, "UPDATE akadze_jobs SET parked = 'limit' WHERE id = $1", held)
    runner = CliRunner()
    shown = await asyncio.to_thread(
        runner.invoke, cli, ["jobs", "explain", str(held), "--database-url", database_url]
    )
    assert shown.exit_code == 0, shown.output
    assert (
        "  - held by its limit: parked (by its enqueue, or by a claim that found its group full)"
        in shown.stdout
    )
    assert "ready" not in shown.stdout
