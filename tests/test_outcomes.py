"""The outcome table of the spec, row by row: pure decisions, then real runs on a real database."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from akadze import Akadze, Cancel, Fail, JobState, ResultNotJson, Retry, Snooze
from akadze.db.queries import Queries
from akadze.outcomes import RunEnd, decide
from akadze.testing import drain
from akadze.worker import Worker
from akadze.worker.rescuer import rescue_lost
from tests.conftest import wait_until
from tests.support import module_database, seconds_until_run


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class PureRow:
    end: RunEnd
    error: BaseException | None
    state: JobState
    #: the attempt counter after the run that was claimed as attempt 2 (of 5)
    attempt: int
    #: None: no delay; a pair: the delay's bounds in seconds
    delay: tuple[float, float] | None


PURE_TABLE = {
    "returns-json": PureRow(RunEnd.RETURNED, None, JobState.SUCCEEDED, 2, None),
    "returns-non-json": PureRow(RunEnd.RAISED, ResultNotJson("datetime"), JobState.QUEUED, 2, (1, 2)),
    "raises": PureRow(RunEnd.RAISED, ValueError("x"), JobState.QUEUED, 2, (1, 2)),
    "times-out": PureRow(RunEnd.RAISED, TimeoutError(), JobState.QUEUED, 2, (1, 2)),
    "retry": PureRow(RunEnd.RAISED, Retry(HOUR), JobState.QUEUED, 2, (3600, 3600)),
    "snooze": PureRow(RunEnd.RAISED, Snooze(HOUR), JobState.QUEUED, 1, (3600, 3600)),
    "fail": PureRow(RunEnd.RAISED, Fail("no"), JobState.FAILED, 2, None),
    "cancel": PureRow(RunEnd.RAISED, Cancel(), JobState.CANCELLED, 2, None),
    "worker-lost": PureRow(RunEnd.WORKER_LOST, None, JobState.QUEUED, 2, (1, 2)),
    "graceful-shutdown": PureRow(RunEnd.SHUTDOWN, None, JobState.QUEUED, 1, (0, 0)),
}


@pytest.mark.parametrize("row", PURE_TABLE.values(), ids=PURE_TABLE.keys())
def test_decide_follows_every_row_of_the_outcome_table(row: PureRow) -> None:
    completion = decide(row.end, attempt=2, max_attempts=5, error=row.error, rng=random.Random(3))
    assert completion.state is row.state
    assert completion.attempt == row.attempt
    if row.delay is None:
        assert completion.delay_s is None
    else:
        assert completion.delay_s is not None
        assert row.delay[0] <= completion.delay_s <= row.delay[1]


@pytest.mark.parametrize(
    "error",
    [ValueError("x"), ResultNotJson("datetime"), TimeoutError(), Retry(HOUR)],
    ids=["raises", "returns-non-json", "times-out", "retry"],
)
def test_a_spent_budget_ends_failed_instead_of_retried(error: BaseException) -> None:
    completion = decide(RunEnd.RAISED, attempt=3, max_attempts=3, error=error)
    assert completion.state is JobState.FAILED
    assert completion.attempt == 3


def test_a_rescue_with_the_budget_spent_ends_failed() -> None:
    completion = decide(RunEnd.WORKER_LOST, attempt=3, max_attempts=3)
    assert completion.state is JobState.FAILED


def test_snooze_and_shutdown_do_not_spend_the_budget() -> None:
    for end, error in ((RunEnd.RAISED, Snooze(HOUR)), (RunEnd.SHUTDOWN, None)):
        completion = decide(end, attempt=3, max_attempts=3, error=error)
        assert completion.state is JobState.QUEUED
        assert completion.attempt == 2


def test_only_a_return_survives_a_cancel_request() -> None:
    returned = decide(RunEnd.RETURNED, attempt=1, max_attempts=3)
    assert not returned.cancellable
    for error in (ValueError(), Retry(), Snooze(HOUR), Fail(), ResultNotJson("x")):
        assert decide(RunEnd.RAISED, attempt=1, max_attempts=3, error=error).cancellable


# -- the same table, run for real ------------------------------------------------------------


@dataclass(frozen=True)
class RealRow:
    """One row of the spec's table as a real run: the body, how the run is driven, and the
    expected job afterwards (with max_attempts 3, after its first run)."""

    body: Callable[[], Awaitable[Any]]
    state: JobState
    attempt: int
    delay: tuple[float, float] | None
    error_type: str | None
    drive: str = "drain"
    max_attempts: int = 3
    timeout: timedelta | None = None


async def _return_json() -> Any:
    return {"ok": [1, 2.5, "three", None, True]}


async def _return_datetime() -> Any:
    return datetime.now(UTC)


async def _raise() -> Any:
    raise ValueError("broken")


async def _sleep_past_timeout() -> Any:
    await asyncio.sleep(30)


async def _retry() -> Any:
    raise Retry(HOUR)


async def _snooze() -> Any:
    raise Snooze(HOUR)


async def _fail() -> Any:
    raise Fail("vendor rejected the export")


async def _cancel() -> Any:
    raise Cancel()


async def _block() -> Any:
    await asyncio.Event().wait()


REAL_TABLE = {
    "returns-json": RealRow(_return_json, JobState.SUCCEEDED, 1, None, None),
    "returns-non-json": RealRow(_return_datetime, JobState.QUEUED, 1, (0.3, 1), "ResultNotJson"),
    "raises": RealRow(_raise, JobState.QUEUED, 1, (0.3, 1), "ValueError"),
    "times-out": RealRow(
        _sleep_past_timeout, JobState.QUEUED, 1, (0.3, 1), "RunTimeout", timeout=timedelta(seconds=0.2)
    ),
    "retry": RealRow(_retry, JobState.QUEUED, 1, (3590, 3600), "akadze.Retry"),
    "snooze": RealRow(_snooze, JobState.QUEUED, 0, (3590, 3600), None),
    "fail": RealRow(_fail, JobState.FAILED, 1, None, "akadze.Fail"),
    "cancel": RealRow(_cancel, JobState.CANCELLED, 1, None, None),
    "worker-lost": RealRow(_return_json, JobState.QUEUED, 1, (0.3, 1), "akadze.WorkerLost", "rescue"),
    "graceful-shutdown": RealRow(_block, JobState.QUEUED, 0, (-5, 0), None, "shutdown"),
    "raises-budget-spent": RealRow(_raise, JobState.FAILED, 1, None, "ValueError", max_attempts=1),
    "non-json-budget-spent": RealRow(
        _return_datetime, JobState.FAILED, 1, None, "ResultNotJson", max_attempts=1
    ),
    "retry-budget-spent": RealRow(_retry, JobState.FAILED, 1, None, "akadze.Retry", max_attempts=1),
    "lost-budget-spent": RealRow(
        _return_json, JobState.FAILED, 1, None, "akadze.WorkerLost", "rescue", max_attempts=1
    ),
}


async def _drive(app: Akadze, row: RealRow, job_id: int) -> None:
    if row.drive == "drain":
        assert await drain(app) == 1
    elif row.drive == "rescue":
        # claimed by a worker that is not registered (it died before its first heartbeat)
        async with app.engine.connect() as conn:
            claimed = await Queries.claim(conn, ["default"], 1, "00000000-0000-0000-0000-000000000001")
            await conn.commit()
        assert [job.id for job in claimed] == [job_id]
        rescued = await rescue_lost(app.engine)
        assert [job.id for job in rescued] == [job_id]
    else:
        worker = Worker(app, shutdown_timeout=timedelta(milliseconds=100), listen=False)
        serving = asyncio.create_task(worker.run(handle_signals=False))

        async def running() -> bool:
            job = await app.get_job(job_id)
            return job is not None and job.state is JobState.RUNNING

        await wait_until(running)
        worker.stop()
        await asyncio.wait_for(serving, 10)


@pytest.mark.parametrize("row", REAL_TABLE.values(), ids=REAL_TABLE.keys())
async def test_every_row_of_the_outcome_table_holds_on_a_real_run(
    make_app: Callable[..., Akadze], database_url: str, row: RealRow
) -> None:
    app = make_app()
    body = row.body

    # a task policy that would be obvious if used: a rescue must ignore it
    @app.task(
        "row",
        max_attempts=row.max_attempts,
        timeout=row.timeout,
        backoff=(lambda attempt: timedelta(days=2)) if row.drive == "rescue" else None,
    )
    async def run_row() -> Any:
        return await body()

    job = await run_row.enqueue()
    await _drive(app, row, job.id)
    after = await app.get_job(job.id)
    assert after is not None
    assert after.state is row.state
    assert after.attempt == row.attempt
    if row.error_type is None:
        assert after.errors == ()
    else:
        assert len(after.errors) == 1
        assert after.errors[0].type.endswith(row.error_type)
        assert after.errors[0].attempt == 1
    if row.state is JobState.SUCCEEDED:
        assert after.result == await _return_json()
    else:
        assert after.result is None
    if row.state.finished:
        assert after.finished_at is not None
    else:
        assert after.finished_at is None
        assert after.worker_id is None
    if row.delay is not None:
        low, high = row.delay
        assert low - 0.5 <= await seconds_until_run(database_url, job.id) <= high
