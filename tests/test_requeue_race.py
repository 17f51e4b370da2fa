"""Requeue of a failed unique job racing a new job with the same key (issue 32, point 7).

The new job's insert is left uncommitted while the requeue runs, so the requeue's statement
cannot see it in its snapshot and waits on the unique index; the insert then commits. Before
the fix the requeue raised a raw IntegrityError and left the caller's transaction aborted (and
`akadze jobs requeue` printed a traceback); now it is UniqueConflictError naming the holder,
the transaction goes on, and the CLI prints one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from sqlalchemy import text

from akadze import Akadze, Fail, JobState, Unique, requeue
from akadze.errors import UniqueConflictError
from akadze.testing import drain
from tests.conftest import wait_until
from tests.support import fetchval, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def doomed_app(database_url: str) -> Akadze:
    app = Akadze(database_url=database_url)

    @app.task("doomed", unique=Unique(), max_attempts=1)
    async def doomed(account: int) -> None:
        raise Fail("no")

    return app


async def racing(
    database_url: str, requeue_it: Callable[[int], Coroutine[Any, Any, Any]]
) -> tuple[int, int, Any]:
    """A failed unique job; a new job with its key inserted and not committed while
    ``requeue_it(old_id)`` runs (and waits on the unique index); then the insert commits.
    Returns the old job's id, the new one's and what ``requeue_it`` returned or raised."""
    app = doomed_app(database_url)
    doomed = app.tasks["doomed"]
    try:
        old = await doomed.enqueue(account=1)
        await drain(app)
        assert (await app.get_job(old.id)).state is JobState.FAILED  # type: ignore[union-attr]
        async with app.engine.connect() as producer:
            await producer.begin()
            newer = await doomed.using(session=producer).enqueue(account=1)
            waiting = asyncio.create_task(requeue_it(old.id))

            async def blocked() -> bool:
                return bool(
                    await fetchval(
                        database_url,
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND query LIKE '%akadze_jobs%'",
                    )
                )

            await wait_until(blocked, timeout=20)
            await producer.commit()
        outcome: Any
        try:
            outcome = await waiting
        except Exception as exc:  # the test looks at what was raised
            outcome = exc
        return old.id, newer.id, outcome
    finally:
        await app.dispose()


async def test_requeue_racing_a_new_job_with_its_key_is_a_unique_conflict_in_a_usable_transaction(
    database_url: str,
) -> None:
    app = Akadze(database_url=database_url)
    after: list[int] = []
    try:

        async def requeue_in_a_transaction(job_id: int) -> Any:
            async with app.engine.begin() as conn:
                try:
                    return await requeue(conn, job_id)
                finally:
                    # the caller's transaction is still usable after the refusal
                    after.append((await conn.execute(text("SELECT 1"))).scalar_one())

        old, newer, outcome = await racing(database_url, requeue_in_a_transaction)
    finally:
        await app.dispose()
    assert isinstance(outcome, UniqueConflictError), repr(outcome)
    assert outcome.job_id == old and outcome.held_by == newer
    assert after == [1]
    assert await fetchval(database_url, f"SELECT state FROM akadze_jobs WHERE id = {old}") == "failed"


async def test_jobs_requeue_racing_a_new_job_prints_one_line_and_exits_1(database_url: str) -> None:
    from typer.testing import CliRunner

    from akadze.cli import app as cli

    def run_cli(job_id: int) -> Any:
        return CliRunner().invoke(
            cli, ["jobs", "requeue", str(job_id)], env={"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": ""}
        )

    async def in_thread(job_id: int) -> Any:
        return await asyncio.to_thread(run_cli, job_id)

    old, newer, result = await racing(database_url, in_thread)
    assert result.exit_code == 1, result.output
    assert f"job {old} was not requeued: job {newer} holds its unique key" in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
