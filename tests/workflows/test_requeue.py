"""requeue of a failed step takes back the steps its failure cancelled (issue 29, point 2);
the decision is pure (akadze.control.steps.reparked), the two statements do the rest."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from akadze import Akadze, JobState, Workflow, requeue
from akadze.control.steps import Dependent, reparked
from akadze.errors import WorkflowError
from akadze.testing import drain
from tests.support import execute, fetch, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def flaky(app: Akadze) -> tuple[Any, set[str], list[str]]:
    failing: set[str] = set()
    ran: list[str] = []

    @app.task("wf.step", max_attempts=1)
    async def step(name: str) -> None:
        ran.append(name)
        if name in failing:
            raise ValueError(f"{name} broke")

    return step, failing, ran


async def states(app: Akadze, jobs: dict[str, Any]) -> dict[str, JobState]:
    found = await app.get_workflow(next(iter(jobs.values())).workflow_id)
    return {name: job.state for name, job in found.items()}


async def waits(database_url: str, jobs: dict[str, Any]) -> dict[str, tuple[str, str | None, int]]:
    rows = await fetch(
        database_url,
        "SELECT step, state, parked, deps_left FROM akadze_jobs WHERE workflow_id = $1",
        next(iter(jobs.values())).workflow_id,
    )
    return {r["step"]: (r["state"], r["parked"], r["deps_left"]) for r in rows}


async def test_requeue_of_a_failed_step_takes_back_the_steps_it_cancelled(
    app: Akadze, database_url: str
) -> None:
    step, failing, ran = flaky(app)
    wf = Workflow()
    wf.add("a", step.bind(name="a"))
    wf.add("b", step.bind(name="b"), after=["a"])
    wf.add("c", step.bind(name="c"), after=["b"])
    jobs = await wf.enqueue()
    failing.add("a")
    await drain(app)
    assert await states(app, jobs) == {"a": JobState.FAILED, "b": JobState.CANCELLED, "c": JobState.CANCELLED}

    failing.clear()
    async with app.engine.begin() as conn:
        again = await requeue(conn, jobs["a"].id)
    assert again is not None and again.state is JobState.QUEUED
    assert await waits(database_url, jobs) == {
        "a": ("queued", None, 0),
        "b": ("queued", "deps", 1),
        "c": ("queued", "deps", 1),
    }
    await drain(app)
    assert ran == ["a", "a", "b", "c"]
    assert await states(app, jobs) == dict.fromkeys(jobs, JobState.SUCCEEDED)


async def test_a_step_that_another_failed_parent_cancelled_stays_cancelled_until_both_are_requeued(
    app: Akadze, database_url: str
) -> None:
    step, failing, ran = flaky(app)
    wf = Workflow()
    wf.add("ship", step.bind(name="ship"))
    wf.add("mail", step.bind(name="mail"))
    wf.add("close", step.bind(name="close"), after=["ship", "mail"])
    jobs = await wf.enqueue()
    failing.update({"ship", "mail"})
    await drain(app)
    assert (await states(app, jobs))["close"] is JobState.CANCELLED

    failing.clear()
    async with app.engine.begin() as conn:
        await requeue(conn, jobs["ship"].id)
    assert (await waits(database_url, jobs))["close"] == ("cancelled", "deps", 2)
    await drain(app)
    assert (await states(app, jobs))["close"] is JobState.CANCELLED
    async with app.engine.begin() as conn:
        await requeue(conn, jobs["mail"].id)
    assert (await waits(database_url, jobs))["close"] == ("queued", "deps", 1)
    await drain(app)
    assert await states(app, jobs) == dict.fromkeys(jobs, JobState.SUCCEEDED)
    assert ran.count("close") == 1


async def test_a_waiting_step_that_runs_whatever_waits_again_for_a_requeued_parent(
    app: Akadze, database_url: str
) -> None:
    step, failing, _ = flaky(app)
    wf = Workflow()
    wf.add("a", step.bind(name="a"))
    wf.add("gate", step.bind(name="gate"), after=["slow"])
    wf.add("slow", step.using(queue="later").bind(name="slow"))
    wf.add("cleanup", step.bind(name="cleanup"), after=["a", "gate"], after_failure="run")
    jobs = await wf.enqueue()
    failing.add("a")
    await drain(app, queues=["default"])
    assert (await waits(database_url, jobs))["cleanup"] == ("queued", "deps", 1)
    async with app.engine.begin() as conn:
        await requeue(conn, jobs["a"].id)
    assert (await waits(database_url, jobs))["cleanup"] == ("queued", "deps", 2)


def test_reparked_walks_the_rule_without_a_database() -> None:
    # 1 requeued; 2 and 3 cancelled by it; 4 cancelled by 3 and by 9, which failed on its own;
    # 5 waits whatever for 1 and 6; 7 succeeded long ago
    dep = "akadze.DependencyFailed"
    steps = {
        2: Dependent("cancelled", "deps", "cancel", dep, {1: "queued"}),
        3: Dependent("cancelled", "deps", "cancel", dep, {2: "cancelled", 7: "succeeded"}),
        4: Dependent("cancelled", "deps", "cancel", dep, {3: "cancelled", 9: "failed"}),
        5: Dependent("queued", "deps", "run", None, {1: "queued", 6: "running"}),
        8: Dependent("cancelled", None, "cancel", None, {1: "queued"}),
    }
    assert reparked(1, steps) == ({2: 1, 3: 1}, {5: 1})


#: a fan-in ``j`` after ``f`` and ``q``, as failed_parent_of_a_fan_in leaves it
AFTER_F_FAILED = {"f": ("failed", None, 0), "q": ("queued", None, 0), "j": ("cancelled", "deps", 2)}


async def failed_parent_of_a_fan_in(
    app: Akadze, database_url: str
) -> tuple[dict[str, Any], set[str], list[str]]:
    """A fan-in ``j`` after ``f`` and ``q``: ``f`` failed (so ``j`` was cancelled), ``q`` still
    queued (due in an hour). Returns the steps, the names that fail and the names run."""
    step, failing, ran = flaky(app)
    wf = Workflow()
    wf.add("f", step.bind(name="f"))
    wf.add("q", step.bind(name="q"))
    wf.add("j", step.bind(name="j"), after=["f", "q"])
    jobs = await wf.enqueue()
    await execute(
        database_url, f"UPDATE akadze_jobs SET run_at = now() + interval '1 hour' WHERE id = {jobs['q'].id}"
    )
    failing.add("f")
    await drain(app)
    assert await waits(database_url, jobs) == AFTER_F_FAILED
    return jobs, failing, ran


async def test_a_requeue_counts_a_parent_that_ended_while_it_waited_for_the_steps_lock(
    app: Akadze, database_url: str
) -> None:
    """A parent ``q`` ends (its write also locks the fan-in ``j``, as the settle step does) while
    a requeue of the other parent ``f`` waits for ``j``'s lock: the requeue must read ``q`` as it
    ended, not as its statement's snapshot had it (still queued), or ``j`` waits for a parent
    that will never end again and stays parked for ever."""
    jobs, failing, ran = await failed_parent_of_a_fan_in(app, database_url)

    failing.clear()
    ending = await asyncpg.connect(plain(database_url))
    try:
        # q's end, as a worker's write would make it: q succeeded and the fan-in's row locked
        tx = ending.transaction()
        await tx.start()
        await ending.execute(
            "UPDATE akadze_jobs SET state = 'succeeded', finished_at = now() WHERE id = $1", jobs["q"].id
        )
        await ending.execute("SELECT 1 FROM akadze_jobs WHERE id = $1 FOR UPDATE", jobs["j"].id)

        async def requeue_f() -> None:
            async with app.engine.begin() as conn:
                assert await requeue(conn, jobs["f"].id) is not None

        requeuing = asyncio.create_task(requeue_f())
        for _ in range(200):  # until the requeue waits for j's lock
            if await ending.fetchval(
                "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype IN ('transactionid', 'tuple')"
            ):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the requeue never waited for the fan-in's lock")
        await tx.commit()
        await asyncio.wait_for(requeuing, 10)
    finally:
        await ending.close()

    assert (await waits(database_url, jobs))["j"] == ("queued", "deps", 1)
    await drain(app)
    assert ran == ["f", "f", "j"]
    assert await states(app, jobs) == dict.fromkeys(jobs, JobState.SUCCEEDED)


async def test_a_requeue_of_a_step_outside_read_committed_is_refused(app: Akadze, database_url: str) -> None:
    """Under REPEATABLE READ the parents' states cannot be read as they are now (a parent that
    ended after the transaction's snapshot reads as running, and the fan-in after it would wait
    for it for ever): the requeue of a step is refused with a clear error, nothing changed."""
    jobs, _, _ = await failed_parent_of_a_fan_in(app, database_url)

    async with app.engine.connect() as conn:
        conn = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with conn.begin():
            with pytest.raises(WorkflowError, match="needs a READ COMMITTED transaction"):
                await requeue(conn, jobs["f"].id)
    assert await waits(database_url, jobs) == AFTER_F_FAILED
