"""Workflow transitions reach the events seam and the metrics (issue 29, point 5): a released
step is RELEASED, a step a failure cancels is CANCELLED with akadze.DependencyFailed, and
``akadze_workflow_steps_total`` counts both."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from akadze import Akadze, Fail, JobState, Workflow, current
from akadze.events import Event, Kind
from akadze.events.metrics import instrument
from akadze.testing import drain


async def test_released_and_dependency_cancelled_steps_are_published_and_counted(app: Akadze) -> None:
    events: list[Event] = []
    app.subscribe(events.append, kinds=[Kind.RELEASED, Kind.CANCELLED])
    registry = CollectorRegistry()
    undo = instrument(app, registry)

    @app.task("wf.step", max_attempts=1)
    async def step(name: str) -> None:
        if name == "ship":
            raise Fail("no stock")

    wf = Workflow()
    wf.add("charge", step.bind(name="charge"))
    wf.add("ship", step.bind(name="ship"), after=["charge"])
    wf.add("mail", step.bind(name="mail"), after=["charge"])
    wf.add("close", step.bind(name="close"), after=["ship", "mail"])
    wf.add("report", step.bind(name="report"), after=["close"])
    jobs = await wf.enqueue()
    try:
        await drain(app)
        assert await asyncio.to_thread(app.events.flush, 10.0)
    finally:
        undo()
    seen = {(e.kind, e.job_id): e for e in events}
    assert set(seen) == {
        (Kind.RELEASED, jobs["ship"].id),
        (Kind.RELEASED, jobs["mail"].id),
        (Kind.CANCELLED, jobs["close"].id),
        (Kind.CANCELLED, jobs["report"].id),
    }
    close = seen[Kind.CANCELLED, jobs["close"].id]
    assert (close.from_state, close.to_state, close.error_type) == (
        JobState.QUEUED,
        JobState.CANCELLED,
        "akadze.DependencyFailed",
    )
    assert seen[Kind.RELEASED, jobs["mail"].id].to_state is JobState.QUEUED

    def count(transition: str) -> float | None:
        labels = {"task": "wf.step", "queue": "default", "transition": transition}
        return registry.get_sample_value("akadze_workflow_steps_total", labels)

    assert (count("released"), count("dependency_failed")) == (2.0, 2.0)


async def test_a_step_whose_complete_tx_releases_the_next_publishes_it(app: Akadze) -> None:
    events: list[Event] = []
    app.subscribe(events.append, kinds=[Kind.RELEASED])

    @app.task("wf.tx")
    async def tx(name: str) -> None:
        async with current().complete_tx():
            pass

    wf = Workflow().add("a", tx.bind(name="a")).add("b", tx.bind(name="b"), after=["a"])
    jobs = await wf.enqueue()
    assert await drain(app) == 2
    assert await asyncio.to_thread(app.events.flush, 10.0)
    assert [(e.kind, e.job_id) for e in events] == [(Kind.RELEASED, jobs["b"].id)]
