"""retry_priority (issue 12, point 4): the claim takes the highest priority first, then the
earliest run_at, so a herd of due retries goes before fresh work of the same queue; a task's
retry_priority lets its retried jobs make way instead (docs/worker.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from akadze import Akadze, JobState, Retry
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.outcomes import RunEnd, Snooze, decide
from akadze.testing import drain
from tests.conftest import wait_until

WORKER = "00000000-0000-0000-0000-000000000001"


async def herd_then_fresh(app: Akadze, retry_priority: int | None) -> list[str]:
    """Three jobs fail once (due again at once), then a fresh job arrives: what a claim of one
    job at a time takes, in order."""

    backoff = timedelta(milliseconds=300)

    @app.task("herd.flaky", queue="herd", retry_priority=retry_priority, backoff=lambda attempt: backoff)
    async def flaky(key: str) -> None:
        raise RuntimeError("the downstream is down")

    @app.task("herd.fresh", queue="herd")
    async def fresh(key: str) -> None: ...

    await flaky.enqueue_many([{"key": f"retry-{i}"} for i in range(3)])
    assert await drain(app) == 3

    async def retries_due() -> bool:
        async with app.engine.connect() as conn:
            due = (
                "SELECT count(*) FROM akadze_jobs WHERE state = 'queued' AND attempt = 1 AND run_at <= now()"
            )
            return (await conn.execute(text(due))).scalar_one() == 3

    await wait_until(retries_due, timeout=10)
    await fresh.enqueue(key="fresh")
    taken = []
    async with app.engine.connect() as conn:
        for _ in range(4):
            [job] = await Queries.claim(conn, ["herd"], 1, WORKER)
            taken.append(job.args["key"])
        await conn.commit()
    return taken


async def test_by_default_fresh_work_waits_behind_due_retries(app: Akadze) -> None:
    assert await herd_then_fresh(app, None) == ["retry-0", "retry-1", "retry-2", "fresh"]


async def test_with_a_lower_retry_priority_fresh_work_goes_first(app: Akadze) -> None:
    assert await herd_then_fresh(app, -1) == ["fresh", "retry-0", "retry-1", "retry-2"]
    async with app.engine.connect() as conn:
        rows = (
            await conn.execute(text("SELECT args ->> 'key', priority FROM akadze_jobs ORDER BY id"))
        ).all()
    assert [tuple(row) for row in rows] == [("retry-0", -1), ("retry-1", -1), ("retry-2", -1), ("fresh", 0)]


async def test_a_snooze_or_a_success_keeps_the_priority(app: Akadze) -> None:
    @app.task("herd.snooze", retry_priority=-5, priority=3)
    async def snooze(key: str) -> None:
        if key == "snooze":
            raise Snooze(timedelta(hours=1))

    @app.task("herd.retry", retry_priority=-5, priority=3)
    async def retry(key: str) -> None:
        raise Retry(timedelta(hours=1))

    jobs = [await snooze.enqueue(key="snooze"), await snooze.enqueue(key="ok"), await retry.enqueue(key="r")]
    await drain(app)
    after = [await app.get_job(job.id) for job in jobs]
    assert [(job.state, job.priority) for job in after if job is not None] == [
        (JobState.QUEUED, 3),
        (JobState.SUCCEEDED, 3),
        (JobState.QUEUED, -5),
    ]


def test_decide_sets_the_retry_priority_only_on_a_retry() -> None:
    error = RuntimeError("x")
    assert decide(RunEnd.RAISED, attempt=1, max_attempts=3, error=error, retry_priority=-1).priority == -1
    assert decide(RunEnd.RAISED, attempt=3, max_attempts=3, error=error, retry_priority=-1).priority is None
    assert decide(RunEnd.RAISED, attempt=1, max_attempts=3, error=error).priority is None
    assert decide(RunEnd.WORKER_LOST, attempt=1, max_attempts=3, retry_priority=-1).priority is None
    assert decide(RunEnd.SHUTDOWN, attempt=1, max_attempts=3, retry_priority=-1).priority is None


@pytest.mark.parametrize("bad", [True, 1.5, 2**31, "low"])
def test_retry_priority_is_a_32_bit_integer(bad: object) -> None:
    app = Akadze("postgresql://localhost/unused")
    with pytest.raises(ConfigError, match="retry_priority must be a 32-bit integer"):
        app.task("t", retry_priority=bad)  # type: ignore[arg-type]
