"""current().dependency_results() (issue 29, point 2) and a running step that starts a new
workflow inside complete_tx (point 4: dynamic fan-out, committed with the step's success)."""

from __future__ import annotations

from typing import Any

import pytest

from akadze import Akadze, JobState, Workflow, current
from akadze.testing import drain
from tests.support import fetchval, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def test_a_step_reads_its_parents_results_by_step_name(app: Akadze) -> None:
    seen: list[dict[str, Any]] = []

    @app.task("wf.value", max_attempts=1)
    async def value(v: Any, fail: bool = False) -> Any:
        if fail:
            raise ValueError("no")
        return v

    @app.task("wf.nothing")
    async def nothing() -> None:
        return None

    @app.task("wf.join")
    async def join() -> None:
        seen.append(await current().dependency_results())

    wf = Workflow()
    wf.add("number", value.bind(v=7))
    wf.add("object", value.bind(v={"a": [1, 2]}))
    wf.add("none", nothing.bind())
    wf.add("broken", value.bind(v=1, fail=True))
    wf.add("join", join.bind(), after=["number", "object", "none", "broken"], after_failure="run")
    wf.add("first", join.bind())
    await wf.enqueue()
    await drain(app)
    # the parent that returned nothing is None; the one that failed is absent; a step without
    # parents reads nothing
    assert sorted(seen, key=len) == [{}, {"number": 7, "object": {"a": [1, 2]}, "none": None}]


async def test_outside_a_workflow_there_are_no_dependency_results(app: Akadze) -> None:
    seen: list[dict[str, Any]] = []

    @app.task("plain")
    async def plain() -> None:
        seen.append(await current().dependency_results())

    await plain.enqueue()
    await drain(app)
    assert seen == [{}]


async def test_a_running_step_fans_out_inside_complete_tx(app: Akadze, database_url: str) -> None:
    done: list[int] = []

    @app.task("wf.part")
    async def part(n: int) -> int:
        return n

    @app.task("wf.gather")
    async def gather() -> None:
        done.append(sum((await current().dependency_results()).values()))

    @app.task("wf.split", max_attempts=2)
    async def split(parts: int) -> None:
        wf = Workflow(name="parts")
        for n in range(parts):
            wf.add(f"part-{n}", part.bind(n=n))
        wf.add("gather", gather.bind(), after=[f"part-{n}" for n in range(parts)])
        async with current().complete_tx() as conn:
            await wf.enqueue(session=conn)
            if current().job.attempt == 1:
                raise RuntimeError("rolled back with the step: no workflow committed")

    job = await split.enqueue(parts=50)
    await drain(app, delayed=True)
    after = await app.get_job(job.id)
    assert after is not None and after.state is JobState.SUCCEEDED
    assert done == [sum(range(50))]
    # the first attempt's workflow rolled back with it: one workflow, 51 steps
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workflows") == 1
    assert (
        await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE workflow_id IS NOT NULL") == 51
    )
