"""Workflow.enqueue: every step and edge in one statement, waiting steps parked, bad graphs
refused before anything is written (issue 29, points 1, 4 and 6)."""

from __future__ import annotations

import pytest

from akadze import Akadze, JobState, Workflow
from akadze.db.queries import Queries
from akadze.db.queries.workflows import NewStep
from akadze.errors import WorkflowError
from akadze.workflow import MAX_STEPS
from tests.support import fetch, fetchval


def tasks(app: Akadze):  # type: ignore[no-untyped-def]
    @app.task("wf.charge")
    async def charge(order_id: int) -> int:
        return order_id

    @app.task("wf.ship")
    async def ship(order_id: int, express: bool = False) -> None:
        return None

    return charge, ship


async def test_a_diamond_is_inserted_with_its_edges_and_waiting_steps_parked(
    app: Akadze, database_url: str
) -> None:
    charge, ship = tasks(app)
    wf = Workflow(name="order 42")
    # a child added before its parents: names are resolved at enqueue
    wf.add("close", ship.bind(order_id=42), after=["ship", "mail"])
    wf.add("charge", charge.bind(order_id=42))
    wf.add("ship", ship.bind(order_id=42, express=True), after=["charge"])
    wf.add("mail", ship.bind(order_id=42), after="charge", after_failure="run")
    jobs = await wf.enqueue()

    assert list(jobs) == ["close", "charge", "ship", "mail"]
    workflow_id = jobs["charge"].workflow_id
    assert workflow_id is not None
    assert {job.workflow_id for job in jobs.values()} == {workflow_id}
    assert {name: job.step for name, job in jobs.items()} == {name: name for name in jobs}
    # parents first: every parent's id is below its children's
    assert jobs["charge"].id < jobs["ship"].id < jobs["close"].id
    assert jobs["ship"].args == {"order_id": 42, "express": True}

    rows = {
        r["step"]: r
        for r in await fetch(
            database_url,
            "SELECT step, state, parked, deps_left, after_failure FROM akadze_jobs WHERE workflow_id = $1",
            workflow_id,
        )
    }
    assert {s: (r["state"], r["parked"], r["deps_left"], r["after_failure"]) for s, r in rows.items()} == {
        "charge": ("queued", None, 0, "cancel"),
        "ship": ("queued", "deps", 1, "cancel"),
        "mail": ("queued", "deps", 1, "run"),
        "close": ("queued", "deps", 2, "cancel"),
    }
    edges = {
        (r["parent_id"], r["child_id"])
        for r in await fetch(database_url, "SELECT parent_id, child_id FROM akadze_job_deps")
    }
    ids = {name: job.id for name, job in jobs.items()}
    assert edges == {
        (ids["charge"], ids["ship"]),
        (ids["charge"], ids["mail"]),
        (ids["ship"], ids["close"]),
        (ids["mail"], ids["close"]),
    }
    assert (
        await fetchval(database_url, "SELECT name FROM akadze_workflows WHERE id = $1", workflow_id)
        == "order 42"
    )

    seen = await app.get_workflow(workflow_id)
    assert list(seen) == ["charge", "ship", "mail", "close"]
    assert all(job.state is JobState.QUEUED and job.workflow_id == workflow_id for job in seen.values())
    assert seen["ship"].step == "ship"
    assert await app.get_workflow(workflow_id + 1000) == {}


async def test_a_job_outside_a_workflow_has_no_workflow_id_or_step(app: Akadze) -> None:
    charge, _ = tasks(app)
    job = await charge.enqueue(order_id=1)
    assert (job.workflow_id, job.step) == (None, None)
    read = await app.get_job(job.id)
    assert read is not None
    assert (read.workflow_id, read.step) == (None, None)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda wf, c: wf.add("a", c).add("b", c, after=["nope"]), "waits for 'nope', which is not a step"),
        (
            lambda wf, c: wf.add("a", c, after=["c"]).add("b", c, after=["a"]).add("c", c, after=["b"]),
            "in a cycle: a -> c -> b -> a",
        ),
        (lambda wf, c: wf.add("a", c, after=["a"]), "in a cycle: a -> a"),
        (lambda wf, c: wf, "no step"),
    ],
    ids=["unknown-step", "cycle", "self", "empty"],
)
async def test_a_bad_graph_is_a_clear_error_and_nothing_is_inserted(
    app: Akadze, database_url: str, build, message: str
) -> None:
    charge, _ = tasks(app)
    wf = build(Workflow(), charge.bind(order_id=1))
    with pytest.raises(WorkflowError, match=message) as raised:
        await wf.enqueue()
    assert isinstance(raised.value, ValueError)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 0
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_workflows") == 0
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_job_deps") == 0


async def test_a_duplicate_step_name_is_refused_at_add(app: Akadze) -> None:
    charge, _ = tasks(app)
    wf = Workflow().add("a", charge.bind(order_id=1))
    with pytest.raises(WorkflowError, match="a step named 'a' is already in this workflow"):
        wf.add("a", charge.bind(order_id=2))
    assert len(wf) == 1


async def test_the_statement_that_writes_steps_refuses_a_name_twice(app: Akadze, database_url: str) -> None:
    """No index keeps a step's name unique in its workflow (migration 0017): the one caller of
    enqueue_workflow.sql does, before sending anything."""
    charge, _ = tasks(app)
    call = charge.bind(order_id=1)
    step = NewStep("a", call.new, call.args, (), "cancel")
    async with app.engine.begin() as conn:
        with pytest.raises(WorkflowError, match="a step named 'a' is given twice"):
            await Queries.enqueue_workflow(conn, None, [step, step])
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 0


async def test_a_step_of_another_apps_task_is_refused(make_app) -> None:  # type: ignore[no-untyped-def]
    first, second = make_app(), make_app()
    charge, _ = tasks(first)
    other, _ = tasks(second)
    wf = Workflow().add("a", charge.bind(order_id=1))
    with pytest.raises(WorkflowError, match="belongs to another app"):
        wf.add("b", other.bind(order_id=1))


async def test_more_steps_than_the_limit_are_refused(app: Akadze, monkeypatch: pytest.MonkeyPatch) -> None:
    charge, _ = tasks(app)
    call = charge.bind(order_id=1)
    monkeypatch.setattr("akadze.workflow.MAX_STEPS", 3)
    wf = Workflow().add("a", call).add("b", call).add("c", call)
    with pytest.raises(WorkflowError, match="at most 3 steps"):
        wf.add("d", call)
    assert MAX_STEPS == 100_000


async def test_bad_arguments_are_refused_at_bind(app: Akadze) -> None:
    import pydantic

    charge, _ = tasks(app)
    with pytest.raises(pydantic.ValidationError):
        charge.bind(order_id="not a number")  # type: ignore[arg-type]
    with pytest.raises(WorkflowError, match="after_failure must be 'cancel' or 'run'"):
        Workflow().add("a", charge.bind(order_id=1), after_failure="ignore")  # type: ignore[arg-type]


async def test_a_calls_repr_names_its_task_never_its_arguments(app: Akadze) -> None:
    charge, _ = tasks(app)
    call = charge.bind(order_id=987654321)
    assert repr(call) == "<Call 'wf.charge' queue='default'>"
    assert "987654321" not in repr(Workflow().add("a", call)._steps)
