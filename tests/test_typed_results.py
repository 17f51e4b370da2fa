"""Typed results (issue 31 point 1): ``task.result_of`` decodes a finished job's result to the
task's declared return type, or says why there is none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from typing_extensions import TypedDict

from akadze import Akadze, Fail, JobCancelledError, JobFailedError, request_cancel
from akadze.testing import drain


class Total(TypedDict):
    count: int
    names: list[str]


async def test_result_of_decodes_the_result_to_the_declared_type(app: Akadze) -> None:
    @app.task("stats.total")
    async def total(n: int) -> Total:
        return {"count": n, "names": ["a"] * n}

    @app.task("stats.sync")
    def sync(n: int) -> tuple[int, int]:
        return (n, n)

    job = await total.enqueue(n=2)
    other = await sync.enqueue(n=3)
    await drain(app)
    assert await total.result_of(job) == {"count": 2, "names": ["a", "a"]}
    assert await sync.result_of(other.id, timeout=timedelta(seconds=5)) == (3, 3)  # a list stored


async def test_result_of_a_failed_or_cancelled_job_raises(app: Akadze) -> None:
    @app.task("stats.bad", max_attempts=1)
    async def bad() -> int:
        raise Fail("no data")

    @app.task("stats.later")
    async def later() -> int:
        return 1

    failed = await bad.enqueue()
    cancelled = await later.using(delay=timedelta(hours=1)).enqueue()
    async with app.engine.begin() as conn:
        await request_cancel(conn, cancelled.id)
    await drain(app)
    with pytest.raises(JobFailedError) as info:
        await bad.result_of(failed)
    assert info.value.job_id == failed.id
    assert "no data" in (info.value.message or "")
    with pytest.raises(JobCancelledError):
        await later.result_of(cancelled)


async def test_result_of_times_out(app: Akadze) -> None:
    @app.task("stats.slow")
    async def slow() -> Any:
        return None

    job = await slow.enqueue()
    with pytest.raises(TimeoutError):
        await slow.result_of(job, timeout=0.2)
