"""The worker end to end, in-process on a real database: order, delay, expiry, queues, hooks in
the transition's transaction, the bounded error list, wake-ups and logs without payloads."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze import Akadze, Fail, Job, JobState, Retry, Snooze, current, request_cancel
from akadze.db.queries import Queries
from akadze.testing import drain
from akadze.worker import Worker
from akadze.worker.rescuer import rescue_lost
from tests.apps import basic
from tests.conftest import wait_until
from tests.support import (
    PYTHON,
    ROOT,
    execute,
    fetch,
    fetchval,
    module_database,
    plain,
    seconds_until_run,
    subprocess_env,
    words_with_app,
)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def state_of(app: Akadze, job_id: int) -> JobState:
    job = await app.get_job(job_id)
    assert job is not None
    return job.state


# -- which job, when ------------------------------------------------------------------------


async def test_higher_priority_runs_first_then_earlier_run_at_then_lower_id(app: Akadze) -> None:
    order: list[str] = []

    @app.task("t")
    async def t(label: str) -> None:
        order.append(label)

    now = datetime.now(UTC)
    await t.using(priority=0, run_at=now - timedelta(minutes=1)).enqueue(label="low-old")
    await t.using(priority=5).enqueue(label="high-1")
    await t.using(priority=-3).enqueue(label="lowest")
    await t.using(priority=5).enqueue(label="high-2")
    await t.using(priority=0, run_at=now - timedelta(minutes=2)).enqueue(label="low-older")
    await t.using(priority=5, run_at=now - timedelta(minutes=1)).enqueue(label="high-old")
    assert await drain(app, slots=1) == 6
    assert order == ["high-old", "high-1", "high-2", "low-older", "low-old", "lowest"]


async def test_priority_order_holds_across_the_queues_of_a_worker(app: Akadze) -> None:
    order: list[str] = []

    @app.task("a", queue="a")
    async def a(label: str) -> None:
        order.append(label)

    @app.task("b", queue="b")
    async def b(label: str) -> None:
        order.append(label)

    await a.using(priority=1).enqueue(label="a1")
    await b.using(priority=3).enqueue(label="b3")
    await a.using(priority=2).enqueue(label="a2")
    await b.using(priority=0).enqueue(label="b0")
    assert await drain(app, slots=1) == 4
    assert order == ["b3", "a2", "a1", "b0"]


async def test_the_task_priority_is_the_default_and_using_overrides_it(app: Akadze) -> None:
    order: list[str] = []

    @app.task("urgent", priority=10)
    async def urgent() -> None:
        order.append("urgent")

    @app.task("normal")
    async def normal(label: str) -> None:
        order.append(label)

    await normal.enqueue(label="normal")
    await urgent.enqueue()
    await normal.using(priority=20).enqueue(label="boosted")
    await drain(app, slots=1)
    assert order == ["boosted", "urgent", "normal"]


async def test_a_delayed_job_does_not_run_before_its_time(app: Akadze, database_url: str) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t(n: int) -> None:
        ran.append(n)

    job = await t.using(delay=timedelta(seconds=1)).enqueue(n=1)
    assert await drain(app) == 0
    assert ran == []

    async def due() -> bool:
        return await seconds_until_run(database_url, job.id) <= 0

    await wait_until(due, timeout=5)
    assert await drain(app) == 1
    assert ran == [1]


async def test_a_job_past_its_expiry_ends_cancelled_without_running(app: Akadze) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t(n: int) -> None:
        ran.append(n)

    expired = await t.using(expires_at=datetime.now(UTC) - timedelta(seconds=1)).enqueue(n=1)
    fresh = await t.using(expires_at=datetime.now(UTC) + timedelta(hours=1)).enqueue(n=2)
    assert await drain(app) == 1
    assert ran == [2]
    after = await app.get_job(expired.id)
    assert after is not None
    assert (after.state, after.attempt, after.errors) == (JobState.CANCELLED, 0, ())
    assert after.finished_at is not None
    assert after.started_at is None
    assert await state_of(app, fresh.id) is JobState.SUCCEEDED


async def test_a_worker_takes_only_jobs_of_its_queues(app: Akadze) -> None:
    ran: list[str] = []

    @app.task("a", queue="a")
    async def a() -> None:
        ran.append("a")

    @app.task("b", queue="b")
    async def b() -> None:
        ran.append("b")

    job_a = await a.enqueue()
    job_b = await b.enqueue()
    moved = await a.using(queue="c").enqueue()
    assert await drain(app, queues=["b"]) == 1
    assert ran == ["b"]
    assert await state_of(app, job_a.id) is JobState.QUEUED
    assert await drain(app, queues=["a", "c"]) == 2
    assert await state_of(app, job_b.id) is JobState.SUCCEEDED
    assert await state_of(app, moved.id) is JobState.SUCCEEDED
    assert ran == ["b", "a", "a"]


async def test_without_queues_a_worker_serves_every_queue_of_the_apps_tasks(app: Akadze) -> None:
    @app.task("a", queue="a")
    async def a() -> None: ...

    @app.task("b", queue="b")
    async def b() -> None: ...

    assert Worker(app).queues == ["a", "b"]
    assert Worker(app, queues="x").queues == ["x"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"slots": 0, "queues": ["q"]}, "slots"),
        (
            {
                "heartbeat_interval": timedelta(seconds=20),
                "lost_after": timedelta(seconds=30),
                "queues": ["q"],
            },
            "third",
        ),
        ({"poll_interval": timedelta(0), "queues": ["q"]}, "poll_interval"),
        ({"queues": []}, "no queues"),
    ],
    ids=["no-slots", "heartbeat-too-slow", "zero-poll", "no-queues"],
)
def test_bad_worker_settings_are_a_clear_error(options: dict[str, Any], message: str) -> None:
    app = Akadze(database_url="postgresql://x@localhost/db")
    with pytest.raises(ValueError, match=message):
        Worker(app, **options)


async def test_burst_runs_follow_ups_and_immediate_retries_but_not_delayed_ones(app: Akadze) -> None:
    runs: list[str] = []

    @app.task("second")
    async def second() -> None:
        runs.append("second")

    @app.task("first", backoff=lambda attempt: timedelta(0))
    async def first() -> None:
        runs.append("first")
        if current().job.attempt == 1:
            raise ValueError("once")
        await second.enqueue()
        await second.using(delay=timedelta(hours=1)).enqueue()

    await first.enqueue()
    assert await drain(app) == 3
    assert runs == ["first", "first", "second"]


async def test_a_listening_worker_wakes_at_once_for_a_new_job(app: Akadze, database_url: str) -> None:
    done = asyncio.Event()

    @app.task("t")
    async def t() -> None:
        done.set()

    worker = Worker(app, poll_interval=timedelta(seconds=60), listen=True)
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: fetchval(database_url, "SELECT count(*) = 1 FROM akadze_workers"))
        await t.enqueue()
        # far sooner than the next poll: a notification woke the worker
        await asyncio.wait_for(done.wait(), 5)
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 10)


# -- errors -----------------------------------------------------------------------------------


async def test_the_error_list_keeps_the_newest_twenty_entries(app: Akadze, database_url: str) -> None:
    @app.task("t", max_attempts=25, backoff=lambda attempt: timedelta(0))
    async def t() -> None:
        raise ValueError(f"attempt {current().job.attempt} broke")

    job = await t.enqueue()
    assert await drain(app) == 25
    after = await app.get_job(job.id)
    assert after is not None
    assert after.state is JobState.FAILED
    assert [e.attempt for e in after.errors] == list(range(6, 26))
    assert [e.message for e in after.errors] == [f"attempt {n} broke" for n in range(6, 26)]
    assert {e.type for e in after.errors} == {"ValueError"}
    raw = await fetchval(database_url, "SELECT errors::text FROM akadze_jobs WHERE id = $1", job.id)
    entries = json.loads(raw)
    assert all(set(entry) == {"attempt", "at", "type", "message"} for entry in entries)
    assert all(datetime.fromisoformat(entry["at"]).tzinfo is not None for entry in entries)


async def test_error_types_are_qualified_class_names(app: Akadze) -> None:
    class VendorDown(Exception):
        pass

    @app.task("t", max_attempts=1)
    async def t() -> None:
        raise VendorDown("503")

    job = await t.enqueue()
    await drain(app)
    after = await app.get_job(job.id)
    assert after is not None
    assert after.errors[0].type == f"{__name__}.{VendorDown.__qualname__}"
    assert after.errors[0].message == "503"


async def test_a_snooze_keeps_the_errors_and_the_attempts(app: Akadze) -> None:
    @app.task("t", backoff=lambda attempt: timedelta(0))
    async def t() -> None:
        if current().job.attempt == 1:
            raise ValueError("first")
        raise Snooze(timedelta(hours=1))

    job = await t.enqueue()
    assert await drain(app) == 2
    after = await app.get_job(job.id)
    assert after is not None
    assert (after.state, after.attempt) == (JobState.QUEUED, 1)
    assert [e.message for e in after.errors] == ["first"]


async def test_a_job_of_a_task_this_worker_does_not_know_spends_an_attempt(
    make_app: Callable[..., Akadze],
) -> None:
    producer = make_app()

    @producer.task("gone")
    async def gone() -> None: ...

    job = await gone.enqueue()
    worker_app = make_app()

    @worker_app.task("other")
    async def other() -> None: ...

    assert await drain(worker_app, queues=["default"]) == 1
    after = await worker_app.get_job(job.id)
    assert after is not None
    assert (after.state, after.attempt) == (JobState.QUEUED, 1)
    assert after.errors[0].type.endswith("UnknownTaskError")


async def test_arguments_that_no_longer_validate_spend_an_attempt_without_echoing_values(
    app: Akadze, database_url: str
) -> None:
    @app.task("t", max_attempts=1)
    async def t(n: int) -> None: ...

    job = await t.enqueue(n=1)
    await execute(
        database_url, f"""UPDATE akadze_jobs SET args = '{{"n": "secret-value"}}' WHERE id = {job.id}"""
    )
    await drain(app)
    after = await app.get_job(job.id)
    assert after is not None
    assert after.state is JobState.FAILED
    assert "n:" in after.errors[0].message
    assert "secret-value" not in after.errors[0].message


# -- on_transition: in the transaction that changes the state -----------------------------------


@pytest.fixture
async def transitions(database_url: str) -> str:
    await execute(
        database_url,
        "CREATE TABLE transitions (job_id bigint, from_state text, to_state text, "
        "seen_inside text, seen_outside text)",
    )
    return database_url


def recording_hook(database_url: str, *, fail_on: tuple[str, str] | None = None) -> Any:
    """An on_transition hook that writes a row with its connection, and checks that the change
    is visible in its transaction but not yet outside it. It raises on ``fail_on``."""

    async def hook(conn: AsyncConnection, job: Job, from_state: JobState, to_state: JobState) -> None:
        assert isinstance(conn, AsyncConnection)
        assert conn.in_transaction()
        inside = await conn.scalar(text("SELECT state FROM akadze_jobs WHERE id = :id"), {"id": job.id})
        outside = await fetchval(database_url, "SELECT state FROM akadze_jobs WHERE id = $1", job.id)
        await conn.execute(
            text("INSERT INTO transitions VALUES (:id, :f, :t, :inside, :outside)"),
            {"id": job.id, "f": from_state.value, "t": to_state.value, "inside": inside, "outside": outside},
        )
        if (from_state.value, to_state.value) == fail_on:
            raise RuntimeError("hook failed")

    return hook


async def recorded(database_url: str) -> list[tuple[Any, ...]]:
    rows = await fetch(database_url, "SELECT * FROM transitions ORDER BY ctid")
    return [tuple(row) for row in rows]


async def test_on_transition_runs_for_every_transition_inside_its_transaction(
    app: Akadze, transitions: str
) -> None:
    @app.task("t", backoff=lambda attempt: timedelta(0))
    async def t() -> None:
        if current().job.attempt == 1:
            raise ValueError("once")

    @app.task("expired")
    async def expired() -> None: ...

    app.hooks.on_transition.append(recording_hook(transitions))
    job = await t.enqueue()
    gone = await expired.using(expires_at=datetime.now(UTC) - timedelta(seconds=1)).enqueue()
    await drain(app)
    rows = await recorded(transitions)
    assert [r for r in rows if r[0] == job.id] == [
        (job.id, "queued", "running", "running", "queued"),
        (job.id, "running", "queued", "queued", "running"),
        (job.id, "queued", "running", "running", "queued"),
        (job.id, "running", "succeeded", "succeeded", "running"),
    ]
    assert [r for r in rows if r[0] == gone.id] == [(gone.id, "queued", "cancelled", "cancelled", "queued")]


async def test_on_transition_runs_in_the_rescue_transaction(app: Akadze, transitions: str) -> None:
    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    async with app.engine.connect() as conn:
        await Queries.claim(conn, ["default"], 1, "00000000-0000-0000-0000-000000000002")
        await conn.commit()
    await rescue_lost(app.engine, [recording_hook(transitions)])
    assert await recorded(transitions) == [(job.id, "running", "queued", "queued", "running")]


async def test_on_transition_runs_in_the_callers_transaction_for_a_cancel(
    app: Akadze, transitions: str
) -> None:
    @app.task("t")
    async def t() -> None: ...

    app.hooks.on_transition.append(recording_hook(transitions))
    kept = await t.enqueue()
    undone = await t.enqueue()
    async with app.engine.begin() as conn:
        assert await request_cancel(conn, kept.id, app=app)
    async with app.engine.connect() as conn:
        await conn.begin()
        assert await request_cancel(conn, undone.id, app=app)
        await conn.rollback()
    assert await recorded(transitions) == [(kept.id, "queued", "cancelled", "cancelled", "queued")]
    assert await state_of(app, undone.id) is JobState.QUEUED


async def test_a_failing_hook_rolls_back_with_its_completion_and_the_outcome_is_still_recorded(
    app: Akadze, transitions: str
) -> None:
    @app.task("t")
    async def t() -> None: ...

    app.hooks.on_transition.append(recording_hook(transitions, fail_on=("running", "succeeded")))
    job = await t.enqueue()
    await drain(app)
    assert await state_of(app, job.id) is JobState.SUCCEEDED
    assert [r[1:3] for r in await recorded(transitions)] == [("queued", "running")]


async def test_a_failing_hook_at_claim_rolls_back_with_the_claim_and_the_worker_carries_on(
    app: Akadze, transitions: str
) -> None:
    ran: list[int] = []

    @app.task("t")
    async def t(n: int) -> None:
        ran.append(n)

    app.hooks.on_transition.append(recording_hook(transitions, fail_on=("queued", "running")))
    job = await t.enqueue(n=1)
    assert await asyncio.wait_for(drain(app), 20) == 1
    assert ran == [1]
    assert await state_of(app, job.id) is JobState.SUCCEEDED
    rows = await recorded(transitions)
    assert ("queued", "running") not in [r[1:3] for r in rows]


# -- logs --------------------------------------------------------------------------------------

CANARY = "CANARY-7f3e1c0d"


async def test_logs_never_contain_arguments_or_results(
    app: Akadze, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    @app.task("t", max_attempts=2, backoff=lambda attempt: timedelta(0), timeout=timedelta(seconds=5))
    async def t(secret: str, nested: dict[str, Any], items: list[Any]) -> Any:
        job = current().job
        kind = nested["kind"]
        if kind == "retry" and job.attempt == 1:
            raise Retry(timedelta(0))
        if kind == "raise":
            raise ValueError("plain failure")
        if kind == "fail":
            raise Fail("rejected")
        if kind == "non-json":
            return {"value": datetime.now(UTC), "secret": secret}
        if kind == "tx":
            async with current().complete_tx() as conn:
                await conn.execute(text("SELECT :v"), {"v": secret})
        return {"echo": [secret, nested, items]}

    def before(job: Job) -> None:
        logging.getLogger("akadze.test").debug("before_run job %d", job.id)

    app.hooks.before_run.append(before)
    for kind in ("ok", "retry", "raise", "fail", "non-json", "tx"):
        await t.enqueue(
            secret=CANARY,
            nested={"kind": kind, "deeper": {"deepest": [CANARY]}},
            items=[1, {"x": CANARY}],
        )
    await drain(app)
    async with app.engine.connect() as conn:
        await Queries.claim(conn, ["default"], 1, "00000000-0000-0000-0000-000000000003")
        await conn.commit()
    await rescue_lost(app.engine)
    assert caplog.records, "the worker logged nothing at all"
    for record in caplog.records:
        assert CANARY not in record.getMessage(), record.name
        assert CANARY not in repr(record.args), record.name
        assert CANARY not in (record.exc_text or ""), record.name
    assert CANARY not in caplog.text


def test_akadze_worker_burst_exits_zero_once_no_ready_job_is_left(database_url: str) -> None:
    async def prepare() -> None:
        await execute(database_url, "CREATE TABLE recorded (job_id bigint PRIMARY KEY, label text)")
        async with basic.create_app(database_url) as app:
            record = app.get_task("basic.record")
            await record.enqueue_many([{"label": f"job-{n}"} for n in range(20)])
            await record.using(delay=timedelta(hours=1)).enqueue(label="later")

    asyncio.run(prepare())
    done = subprocess.run(
        [PYTHON, "-m", "akadze.cli", "worker", "tests.apps.basic:app", "--burst"],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    counts = asyncio.run(fetch(database_url, "SELECT state, count(*) FROM akadze_jobs GROUP BY state"))
    assert dict(counts) == {"succeeded": 20, "queued": 1}  # type: ignore[arg-type]
    assert asyncio.run(fetchval(database_url, "SELECT count(*) FROM recorded")) == 20
    assert asyncio.run(fetchval(database_url, "SELECT count(*) FROM akadze_workers")) == 0


# -- liveness -----------------------------------------------------------------------------------


async def test_a_worker_declared_lost_registers_again_and_keeps_serving(
    app: Akadze, database_url: str
) -> None:
    ran = asyncio.Event()

    @app.task("t")
    async def t() -> None:
        ran.set()

    worker = Worker(
        app,
        heartbeat_interval=timedelta(milliseconds=100),
        lost_after=timedelta(seconds=1),
        poll_interval=timedelta(milliseconds=100),
        listen=False,
    )
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:

        async def registered() -> bool:
            return bool(
                await fetchval(database_url, "SELECT count(*) FROM akadze_workers WHERE id = $1", worker.id)
            )

        await wait_until(registered)
        await execute(database_url, "DELETE FROM akadze_workers")
        await wait_until(registered)
        await t.enqueue()
        await asyncio.wait_for(ran.wait(), 10)
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 10)


async def test_a_rescue_never_waits_on_a_row_that_a_stalled_run_holds(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    async with app.engine.connect() as conn:
        await Queries.claim(conn, ["default"], 1, "00000000-0000-0000-0000-000000000005")
        await conn.commit()
    holder = await asyncpg.connect(plain(database_url))
    try:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM akadze_jobs WHERE id = $1 FOR UPDATE", job.id)
            assert await asyncio.wait_for(rescue_lost(app.engine), 5) == []
        [rescued] = await rescue_lost(app.engine)
    finally:
        await holder.close()
    assert (rescued.id, rescued.state, rescued.attempt) == (job.id, JobState.QUEUED, 1)


async def test_a_stalled_outcome_write_stops_claims_after_twice_the_slots(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcomes waiting to be written hold slots past a backlog of ``slots``: a write stuck
    behind a row lock must not let the worker claim (and hold in memory) without bound."""
    real_complete = Queries.complete_batch
    unstuck = asyncio.Event()

    async def stuck_complete(conn: Any, ended: Any) -> Any:
        await unstuck.wait()
        return await real_complete(conn, ended)

    monkeypatch.setattr(Queries, "complete_batch", staticmethod(stuck_complete))

    @app.task("t")
    async def t(i: int) -> None:
        return None

    await t.enqueue_many([{"i": i} for i in range(100)])
    worker = Worker(app, slots=4, poll_interval=timedelta(milliseconds=50))
    # the completer's own write is the one stuck: claims do not write outcomes here (a claim
    # that wrote them would be stuck with them: test_a_stalled_claim_that_writes_outcomes_...)
    worker.fetcher.claim_completing = None
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: worker.runs >= 8)
        await asyncio.sleep(0.5)  # polls that would claim more, were the backlog not counted
        running = await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'running'")
        assert worker.runs == running == 8
        unstuck.set()
        await wait_until(lambda: worker.runs == 100)
    finally:
        unstuck.set()
        worker.stop()
        await asyncio.wait_for(serving, 30)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'succeeded'") == 100


def test_a_worker_freezes_what_is_alive_at_its_start_once_per_process(database_url: str) -> None:
    """gc.freeze() as the worker starts (docs/performance.md, "Observability"): the imports and
    the app leave the collector's generations; a second worker of the process adds nothing."""
    body = """
        await t.enqueue()
        before = gc.get_freeze_count()
        await drain(app)
        first = gc.get_freeze_count()
        garbage = [[] for _ in range(1000)]
        await drain(app)
        print(before, first > 1000, gc.get_freeze_count() < first + 1000, len(garbage))
    """
    imports = "import gc\nfrom akadze.testing import drain"
    assert words_with_app(database_url, body, imports) == ["0", "True", "True", "1000"]
