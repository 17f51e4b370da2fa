"""What a step's end does to the steps after it, through a real worker (issue 29, point 2):
success releases, failure and cancel cascade, after_failure="run" runs anyway."""

from __future__ import annotations

from typing import Any

import pytest

from akadze import Akadze, DependencyFailed, Fail, JobState, Workflow
from akadze.testing import drain
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def steps(app: Akadze, fail: set[str] | None = None) -> tuple[Any, list[str]]:
    """One task that records the order its steps ran in, and fails the steps named in ``fail``."""
    ran: list[str] = []
    failing = fail or set()

    @app.task("wf.step", max_attempts=1)
    async def step(name: str) -> str:
        ran.append(name)
        if name in failing:
            raise Fail("told to")
        return name.upper()

    return step, ran


def diamond(step: Any, *, mail_after_failure: str = "cancel") -> Workflow:
    wf = Workflow(name="diamond")
    wf.add("charge", step.bind(name="charge"))
    wf.add("ship", step.bind(name="ship"), after=["charge"])
    wf.add("mail", step.bind(name="mail"), after=["charge"], after_failure=mail_after_failure)  # type: ignore[arg-type]
    wf.add("close", step.bind(name="close"), after=["ship", "mail"])
    return wf


async def states(app: Akadze, workflow_id: int | None) -> dict[str, JobState]:
    assert workflow_id is not None
    return {name: job.state for name, job in (await app.get_workflow(workflow_id)).items()}


async def test_each_step_runs_once_after_every_step_it_waits_for(app: Akadze) -> None:
    step, ran = steps(app)
    jobs = await diamond(step).enqueue()
    assert await drain(app) == 4
    assert ran[0] == "charge" and ran[-1] == "close" and sorted(ran[1:3]) == ["mail", "ship"]
    assert await states(app, jobs["charge"].workflow_id) == dict.fromkeys(jobs, JobState.SUCCEEDED)


async def test_a_failed_step_cancels_the_steps_after_it_with_dependency_failed(app: Akadze) -> None:
    step, ran = steps(app, fail={"charge"})
    jobs = await diamond(step).enqueue()
    await drain(app)
    assert ran == ["charge"]
    seen = await app.get_workflow(jobs["charge"].workflow_id or 0)
    assert {name: job.state for name, job in seen.items()} == {
        "charge": JobState.FAILED,
        "ship": JobState.CANCELLED,
        "mail": JobState.CANCELLED,
        "close": JobState.CANCELLED,
    }
    # each names the step it waited for; none ran or spent an attempt
    assert [(e.type, e.message) for e in seen["ship"].errors] == [
        ("akadze.DependencyFailed", "step 'charge' ended failed")
    ]
    assert seen["close"].errors[-1].message in ("step 'mail' ended cancelled", "step 'ship' ended cancelled")
    assert all(
        seen[name].attempt == 0 and seen[name].started_at is None for name in ("ship", "mail", "close")
    )
    with pytest.raises(DependencyFailed, match="step 'charge' ended failed"):
        await step.result_of(seen["ship"], timeout=5)


async def test_after_failure_run_runs_once_the_others_have_finished(app: Akadze) -> None:
    step, ran = steps(app, fail={"ship"})
    jobs = await diamond(step).enqueue()
    wf = Workflow()
    wf.add("build", step.bind(name="build"))
    wf.add("test", step.bind(name="ship"), after=["build"])  # fails
    wf.add("cleanup", step.bind(name="cleanup"), after=["build", "test"], after_failure="run")
    other = await wf.enqueue()
    await drain(app)
    assert await states(app, jobs["charge"].workflow_id) == {
        "charge": JobState.SUCCEEDED,
        "ship": JobState.FAILED,
        "mail": JobState.SUCCEEDED,
        "close": JobState.CANCELLED,
    }
    assert await states(app, other["build"].workflow_id) == {
        "build": JobState.SUCCEEDED,
        "test": JobState.FAILED,
        "cleanup": JobState.SUCCEEDED,
    }
    assert ran.index("cleanup") > ran.index("build")


async def test_a_cancel_cascades_through_waiting_steps_to_an_after_failure_run_step(app: Akadze) -> None:
    step, ran = steps(app, fail={"a"})
    wf = Workflow()
    wf.add("a", step.bind(name="a"))
    wf.add("b", step.bind(name="b"), after=["a"])
    wf.add("c", step.bind(name="c"), after=["b"])
    wf.add("d", step.bind(name="d"), after=["c"], after_failure="run")
    wf.add("e", step.bind(name="e"), after=["d"])
    jobs = await wf.enqueue()
    await drain(app)
    assert ran == ["a", "d", "e"]
    assert await states(app, jobs["a"].workflow_id) == {
        "a": JobState.FAILED,
        "b": JobState.CANCELLED,
        "c": JobState.CANCELLED,
        "d": JobState.SUCCEEDED,
        "e": JobState.SUCCEEDED,
    }
