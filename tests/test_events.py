"""The events seam: one immutable event per committed transition, delivered outside every
transaction, and subscribers that raise or stall never touch a transition."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from akadze import Akadze, Cancel, Fail, JobState, Retry, Snooze, current, request_cancel, requeue
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.events import Event, Kind
from akadze.events.logs import log_transition
from akadze.outcomes import Verdict
from akadze.testing import drain
from akadze.worker import Worker
from akadze.worker.scheduler import fire_due_schedules
from tests.conftest import wait_until
from tests.support import module_database

CANARY = "CANARY-5d1e9a"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def recorder(app: Akadze) -> list[Event]:
    events: list[Event] = []
    app.subscribe(events.append)
    return events


async def flushed(app: Akadze) -> None:
    assert await asyncio.to_thread(app.events.flush, 10.0)


def of(events: list[Event], job_id: int) -> list[Event]:
    return [event for event in events if event.job_id == job_id]


async def test_a_run_publishes_its_claim_and_its_end_with_every_field(app: Akadze) -> None:
    events = recorder(app)

    @app.task("mail.send", queue="mail", max_attempts=4)
    async def send(secret: str) -> str:
        return secret

    job = await send.enqueue(secret=CANARY)
    await drain(app)
    claimed, ended = of(events, job.id)
    assert claimed.kind is Kind.CLAIMED
    assert (claimed.task, claimed.queue, claimed.from_state, claimed.to_state) == (
        "mail.send",
        "mail",
        JobState.QUEUED,
        JobState.RUNNING,
    )
    assert (claimed.attempt, claimed.run, claimed.outcome, claimed.duration_s) == (1, 1, None, None)
    assert claimed.wait_s is not None and 0 <= claimed.wait_s < 60
    assert claimed.worker_id is not None
    assert ended.kind is Kind.ENDED
    assert (ended.from_state, ended.to_state, ended.outcome) == (
        JobState.RUNNING,
        JobState.SUCCEEDED,
        Verdict.SUCCEEDED,
    )
    assert (ended.attempt, ended.run, ended.error_type) == (1, 1, None)
    assert ended.duration_s is not None and ended.duration_s >= 0
    assert ended.wait_s == claimed.wait_s
    assert ended.worker_id == claimed.worker_id
    assert claimed.at <= ended.at
    # immutable, and nothing of the arguments or the result
    with pytest.raises(AttributeError):
        ended.task = "x"  # type: ignore[misc]
    assert CANARY not in repr(events) and CANARY not in msgspec.json.encode(events).decode()


def raises(error: BaseException) -> Callable[[], Any]:
    async def body() -> None:
        raise error

    return body


@pytest.mark.parametrize(
    ("error", "max_attempts", "to_state", "outcome", "error_type"),
    [
        (ValueError("x"), 3, JobState.QUEUED, Verdict.RETRIED, "ValueError"),
        (ValueError("x"), 1, JobState.FAILED, Verdict.FAILED, "ValueError"),
        (Retry(timedelta(hours=1)), 3, JobState.QUEUED, Verdict.RETRIED, "akadze.Retry"),
        (Snooze(timedelta(hours=1)), 3, JobState.QUEUED, Verdict.SNOOZED, None),
        (Fail("no"), 3, JobState.FAILED, Verdict.FAILED, "akadze.Fail"),
        (Cancel(), 3, JobState.CANCELLED, Verdict.CANCELLED, None),
    ],
    ids=["raises", "raises-last-attempt", "retry", "snooze", "fail", "cancel"],
)
async def test_every_outcome_of_a_run_publishes_its_end(
    app: Akadze,
    error: BaseException,
    max_attempts: int,
    to_state: JobState,
    outcome: Verdict,
    error_type: str | None,
) -> None:
    events = recorder(app)
    task = app.register(
        raises(error), name="t", max_attempts=max_attempts, backoff=lambda _: timedelta(hours=1)
    )
    job = await task.enqueue()
    await drain(app)
    ended = of(events, job.id)[-1]
    assert (ended.kind, ended.from_state, ended.to_state) == (Kind.ENDED, JobState.RUNNING, to_state)
    assert (ended.outcome, ended.error_type) == (outcome, error_type)
    assert ended.attempt == (0 if outcome is Verdict.SNOOZED else 1)


async def test_a_graceful_stop_publishes_the_put_back_as_released(app: Akadze) -> None:
    events = recorder(app)
    started = asyncio.Event()

    @app.task("t")
    async def t() -> None:
        started.set()
        await asyncio.Event().wait()

    job = await t.enqueue()
    worker = Worker(app, shutdown_timeout=timedelta(seconds=0.1), listen=False)
    running = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(started.wait(), 10)
    worker.stop()
    await asyncio.wait_for(running, 20)
    ended = of(events, job.id)[-1]
    assert (ended.kind, ended.to_state, ended.outcome, ended.attempt) == (
        Kind.ENDED,
        JobState.QUEUED,
        Verdict.RELEASED,
        0,
    )


async def test_complete_tx_publishes_committed_once_the_run_ends(app: Akadze) -> None:
    events = recorder(app)

    @app.task("t")
    async def t() -> int:
        async with current().complete_tx():
            pass
        return 7

    job = await t.enqueue()
    await drain(app)
    committed = of(events, job.id)[-1]
    assert (committed.kind, committed.from_state, committed.to_state, committed.outcome) == (
        Kind.COMMITTED,
        JobState.RUNNING,
        JobState.SUCCEEDED,
        Verdict.SUCCEEDED,
    )
    assert committed.duration_s is not None
    assert len(of(events, job.id)) == 2


async def test_a_job_that_expired_before_its_claim_publishes_cancelled(app: Akadze) -> None:
    events = recorder(app)

    @app.task("t")
    async def t() -> None: ...

    job = await t.using(expires_at=datetime.now(UTC) - timedelta(seconds=1)).enqueue()
    await drain(app)
    (cancelled,) = of(events, job.id)
    assert (cancelled.kind, cancelled.from_state, cancelled.to_state, cancelled.outcome) == (
        Kind.CANCELLED,
        JobState.QUEUED,
        JobState.CANCELLED,
        None,
    )


async def test_cancel_and_requeue_publish_once_the_callers_transaction_commits(app: Akadze) -> None:
    events = recorder(app)

    @app.task("t", max_attempts=1)
    async def t() -> None:
        raise Fail("no")

    kept, undone = await t.enqueue(), await t.enqueue()
    async with app.engine.connect() as conn:
        await conn.begin()
        assert await request_cancel(conn, undone.id, app=app)
        await conn.rollback()
        async with conn.begin():
            assert await request_cancel(conn, kept.id, app=app)
            await flushed(app)
            assert of(events, kept.id) == []  # not before the commit
    await flushed(app)
    (cancelled,) = of(events, kept.id)
    assert (cancelled.kind, cancelled.from_state, cancelled.to_state) == (
        Kind.CANCELLED,
        JobState.QUEUED,
        JobState.CANCELLED,
    )
    await drain(app)
    assert of(events, undone.id)[-1].to_state is JobState.FAILED
    async with app.engine.begin() as conn:
        assert await requeue(conn, undone.id, app=app) is not None
    await flushed(app)
    requeued = of(events, undone.id)[-1]
    assert (requeued.kind, requeued.from_state, requeued.to_state) == (
        Kind.REQUEUED,
        JobState.FAILED,
        JobState.QUEUED,
    )


async def test_a_rescue_publishes_the_lost_run(app: Akadze) -> None:
    events = recorder(app)

    @app.task("t", queue="elsewhere")
    async def t() -> None: ...

    job = await t.enqueue()
    async with app.engine.connect() as conn:
        await Queries.claim(conn, ["elsewhere"], 1, "00000000-0000-0000-0000-000000000002")
        await conn.commit()
    worker = Worker(app, queues=["default"], rescue_interval=timedelta(seconds=0.1), listen=False)
    running = asyncio.create_task(worker.run(handle_signals=False))
    await wait_until(lambda: bool(of(events, job.id)))
    worker.stop()
    await asyncio.wait_for(running, 20)
    (rescued,) = of(events, job.id)
    assert (rescued.kind, rescued.from_state, rescued.to_state, rescued.outcome) == (
        Kind.RESCUED,
        JobState.RUNNING,
        JobState.QUEUED,
        Verdict.LOST,
    )
    assert (rescued.error_type, rescued.attempt, rescued.worker_id) == ("akadze.WorkerLost", 1, worker.id)


async def test_a_schedule_fire_publishes_the_job_it_enqueued(app: Akadze) -> None:
    events = recorder(app)

    @app.periodic("tick", every=timedelta(seconds=1))
    async def tick() -> None: ...

    look = await fire_due_schedules(app)
    await flushed(app)
    (job,) = look.fired
    (fired,) = of(events, job.id)
    assert (fired.kind, fired.from_state, fired.to_state, fired.task) == (
        Kind.FIRED,
        None,
        JobState.QUEUED,
        "tick",
    )


async def test_a_raising_subscriber_is_logged_and_breaks_nothing(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("subscriber bug")

    app.subscribe(broken)
    events = recorder(app)

    @app.task("t")
    async def t() -> None: ...

    jobs = await t.enqueue_many([{} for _ in range(20)])
    assert await drain(app) == 20
    for job in jobs:
        assert (await app.get_job(job.id)).state is JobState.SUCCEEDED  # type: ignore[union-attr]
        assert [e.kind for e in of(events, job.id)] == [Kind.CLAIMED, Kind.ENDED]
    failures = [r for r in caplog.records if "events subscriber" in r.getMessage()]
    assert len(failures) == 1  # then counted, not logged per event
    assert failures[0].exc_info is not None


async def test_a_stuck_subscriber_neither_holds_nor_slows_transitions_and_drops_are_counted(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    seen: list[Event] = []

    def stuck(event: Event) -> None:
        seen.append(event)
        gate.wait(60)

    app.subscribe(stuck)
    app.events.max_queued = 5

    @app.task("t")
    async def t() -> None: ...

    jobs = await t.enqueue_many([{} for _ in range(40)])
    draining = asyncio.create_task(drain(app))
    try:

        async def all_succeeded() -> bool:
            states = [(await app.get_job(job.id)).state for job in jobs]  # type: ignore[union-attr]
            return all(state is JobState.SUCCEEDED for state in states)

        await wait_until(all_succeeded, timeout=30)
        # every transition committed while the subscriber still held its first event
        assert len(seen) == 1 and not gate.is_set()
        assert app.events.dropped >= 80 - 1 - 5
        assert any("events dropped" in r.getMessage() for r in caplog.records)
    finally:
        gate.set()
        assert await asyncio.wait_for(draining, 30) == 40


async def test_the_transition_log_line_is_the_first_subscriber(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="akadze.worker")
    assert app.events.subscribers[0] is log_transition

    @app.task("t")
    async def t() -> None: ...

    job = await t.enqueue()
    await drain(app)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"job_id={job.id} ")]
    assert len(lines) == 1
    assert lines[0].startswith(f"job_id={job.id} task=t queue=default state=succeeded attempt=1 duration_ms=")


def test_an_async_subscriber_is_refused(app: Akadze) -> None:
    async def subscriber(event: Event) -> None: ...

    with pytest.raises(ConfigError, match="plain"):
        app.subscribe(subscriber)  # type: ignore[arg-type]


async def test_unsubscribe_stops_delivery(app: Akadze) -> None:
    events: list[Event] = []
    unsubscribe = app.subscribe(events.append)
    unsubscribe()

    @app.task("t")
    async def t() -> None: ...

    await t.enqueue()
    await drain(app)
    assert events == []


async def test_a_subscriber_takes_its_kinds_and_what_its_filter_accepts_and_nothing_else_is_queued(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="akadze.worker")  # the log line takes no success

    @app.task("t")
    async def t() -> None: ...

    # a subscriber of schedule fires only: a drain queues nothing, the thread never starts
    fires: list[Event] = []
    unsubscribe = app.subscribe(fires.append, kinds=[Kind.FIRED])
    await t.enqueue()
    assert await drain(app) == 1
    assert fires == [] and app.events._thread is None
    unsubscribe()

    jobs = await t.enqueue_many([{} for _ in range(3)])
    ends: list[Event] = []
    app.subscribe(ends.append, kinds=[Kind.ENDED])
    first: list[Event] = []
    accepted_in: set[int] = set()

    def accept(event: Event) -> bool:
        accepted_in.add(threading.get_ident())
        return event.job_id == jobs[0].id

    app.subscribe(first.append, accept=accept)
    assert await drain(app) == 3
    await flushed(app)
    assert sorted(e.job_id for e in ends) == [job.id for job in jobs]
    assert {e.kind for e in ends} == {Kind.ENDED}
    assert [(e.job_id, e.kind) for e in first] == [(jobs[0].id, Kind.CLAIMED), (jobs[0].id, Kind.ENDED)]
    assert threading.get_ident() in accepted_in  # asked as the event was published
    with pytest.raises(ConfigError, match="kinds"):
        app.subscribe(ends.append, kinds=["ended"])  # type: ignore[list-item]


async def test_a_tally_takes_events_in_the_publishing_thread_and_a_raising_one_breaks_nothing(
    app: Akadze, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="akadze.worker")  # the log line takes no success
    seen: list[tuple[int, Kind]] = []
    app.events.tally(
        lambda events: seen.extend((threading.get_ident(), event.kind) for event in events),
        kinds=[Kind.ENDED],
    )

    def broken(events: Sequence[Event]) -> None:
        raise RuntimeError("tally bug")

    app.events.tally(broken)

    @app.task("t")
    async def t() -> None: ...

    jobs = await t.enqueue_many([{} for _ in range(5)])
    assert await drain(app) == 5
    # taken before the drain returned, without the events thread, in this (the loop's) thread
    assert seen == [(threading.get_ident(), Kind.ENDED)] * 5
    assert app.events._thread is None
    for job in jobs:
        assert (await app.get_job(job.id)).state is JobState.SUCCEEDED  # type: ignore[union-attr]
    failures = [r for r in caplog.records if "events subscriber" in r.getMessage()]
    assert len(failures) == 1 and "broken" in failures[0].getMessage()
