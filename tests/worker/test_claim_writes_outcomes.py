"""A worker's outcomes waiting when it claims are written by the claim statement itself
(claim_completing): the same rows, events and wake-ups as the completer's own write, nothing
lost or written twice when that statement fails or its reply is lost, and no outcome held
back for a claim that is not about to run."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from akadze import Akadze, Fail, JobState, Limit, Retry, Snooze
from akadze.db.queries import Queries
from akadze.events import Event, Kind
from akadze.outcomes import Completed, Completion, ErrorType, Transition, Verdict
from akadze.worker import Worker
from akadze.worker.claims import choose_claim_completing
from tests.conftest import wait_until
from tests.support import fetch, fetchval, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


class Writes:
    """Counts the outcomes each statement wrote: the claim's (claim_completing) and the
    completer's own (complete_batch); ``fail`` makes the claim's statement fail as asked."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_claim: list[Completion] = []
        self.alone: list[Completion] = []
        #: called with the outcomes before the claim's statement runs: raise to fail it there
        self.before: Callable[[list[Completion]], None] = lambda ended: None
        #: called after it committed: raise to lose its reply
        self.after: Callable[[list[Completion]], None] = lambda ended: None
        real_claim, real_complete = Queries.claim_completing, Queries.complete_batch

        async def claim(conn: Any, queues: Any, limit: int, worker_id: str, ended: Any) -> Any:
            self.before(list(ended))
            found = await real_claim(conn, queues, limit, worker_id, ended)
            self.by_claim += ended
            self.after(list(ended))
            return found

        async def complete(conn: Any, ended: Any) -> list[Completed]:
            written = await real_complete(conn, ended)
            self.alone += ended
            return written

        monkeypatch.setattr(Queries, "claim_completing", staticmethod(claim))
        monkeypatch.setattr(Queries, "complete_batch", staticmethod(complete))


def recorder(app: Akadze) -> list[Event]:
    events: list[Event] = []
    app.subscribe(events.append)
    return events


async def test_every_kind_of_outcome_written_by_the_claim_is_written_as_the_completer_writes_it(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = Writes(monkeypatch)
    events = recorder(app)

    @app.task("ok")
    async def ok(i: int) -> dict[str, int]:
        return {"i": i}

    @app.task("raises", max_attempts=2, backoff=lambda _: timedelta(0))
    async def raises(i: int) -> None:
        raise ValueError(f"boom {i}")

    @app.task("retry", max_attempts=5)
    async def retry(i: int) -> None:
        raise Retry(timedelta(hours=1), reason="later")

    @app.task("snooze")
    async def snooze(i: int) -> None:
        raise Snooze(timedelta(hours=1))

    @app.task("fail")
    async def fail(i: int) -> None:
        raise Fail("no")

    for task in (ok, raises, retry, snooze, fail):
        await task.enqueue_many([{"i": i} for i in range(3)])
    # every job in the first claim: their outcomes all wait for the next one
    worker = Worker(app, slots=20)
    assert await worker.run(burst=True) == 18  # the raising jobs run twice
    assert len(writes.by_claim) == 18 and writes.alone == []

    rows = {
        (r["task"], _json(r["args"])["i"]): r
        for r in await fetch(
            database_url,
            "SELECT task, args, state, attempt, result, errors, worker_id, finished_at, "
            "run_at - now() AS due FROM akadze_jobs",
        )
    }
    for i in range(3):
        assert rows["ok", i]["state"] == "succeeded" and rows["ok", i]["result"] == f'{{"i": {i}}}'
        raised = rows["raises", i]
        assert (raised["state"], raised["attempt"]) == ("failed", 2)
        assert [e["type"] for e in _json(raised["errors"])] == ["ValueError", "ValueError"]
        assert _json(raised["errors"])[-1]["message"] == f"boom {i}"
        retried = rows["retry", i]
        assert (retried["state"], retried["attempt"], retried["finished_at"]) == ("queued", 1, None)
        assert timedelta(minutes=59) < retried["due"] <= timedelta(hours=1)
        assert [e["type"] for e in _json(retried["errors"])] == ["akadze.Retry"]
        snoozed = rows["snooze", i]
        assert (snoozed["state"], snoozed["attempt"], _json(snoozed["errors"])) == ("queued", 0, [])
        assert rows["fail", i]["state"] == "failed"
        assert all(row["worker_id"] is None for row in rows.values())

    assert await asyncio.to_thread(app.events.flush, 10.0)
    ended = [event for event in events if event.kind is Kind.ENDED]
    assert len(ended) == 18
    assert {(e.task, e.to_state) for e in ended} == {
        ("ok", JobState.SUCCEEDED),
        ("raises", JobState.QUEUED),
        ("raises", JobState.FAILED),
        ("retry", JobState.QUEUED),
        ("snooze", JobState.QUEUED),
        ("fail", JobState.FAILED),
    }


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


async def test_a_retry_due_now_written_by_the_last_claim_of_a_burst_still_runs(
    app: Akadze, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim that writes a retry cannot take it (its snapshot sees the job running): a
    burst run claims again before it returns."""
    writes = Writes(monkeypatch)
    runs: list[int] = []

    @app.task("t", max_attempts=3, backoff=lambda _: timedelta(0))
    async def t() -> None:
        runs.append(1)
        if len(runs) < 3:
            raise ValueError("again")

    job = await t.enqueue()
    assert await Worker(app, slots=4).run(burst=True) == 3
    assert len(writes.by_claim) == 3
    got = await app.get_job(job.id)
    assert got is not None and (got.state, got.attempt) == (JobState.SUCCEEDED, 3)


async def test_a_claim_that_fails_gives_its_outcomes_back_to_the_completer(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement that fails (here on the server: an outcome it cannot read) leaves every
    outcome it carried to the completer's own write, and the claim runs again alone."""
    writes = Writes(monkeypatch)
    real_claim = Queries.claim_completing  # the spy: counts what the claims wrote
    broken = [True]

    async def breaks_once(conn: Any, queues: Any, limit: int, worker_id: str, ended: Any) -> Any:
        if broken.pop() if broken else False:
            # a result that is not JSON: the server rejects the whole statement
            ended = [Completion(e.job_id, e.run, e.transition, "{not json") for e in ended]
        return await real_claim(conn, queues, limit, worker_id, ended)

    monkeypatch.setattr(Queries, "claim_completing", staticmethod(breaks_once))

    @app.task("t")
    async def t(i: int) -> int:
        return i

    await t.enqueue_many([{"i": i} for i in range(30)])
    assert await Worker(app, slots=10).run(burst=True) == 30
    states = await fetch(database_url, "SELECT state, result, count(*) AS n FROM akadze_jobs GROUP BY 1, 2")
    assert {(r["state"], r["n"]) for r in states} == {("succeeded", 1)}
    assert {int(r["result"]) for r in states} == set(range(30))
    # each outcome written once: the failed claim's by the completer, the others by either
    assert len(writes.alone) >= 10 and len(writes.alone) + len(writes.by_claim) == 30


@pytest.mark.parametrize("committed", [True, False], ids=["committed", "rolled-back"])
async def test_a_claim_whose_reply_is_lost_loses_nothing_and_runs_nothing_twice(
    app: Akadze,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    committed: bool,
) -> None:
    """A lost reply (the connection dropped) after the statement committed or before it ran:
    the jobs it claimed are adopted (find_claimed), its outcomes are written again, changing
    nothing if it committed, and reported as written, never as fenced out."""
    caplog.set_level(logging.WARNING, logger="akadze.worker")
    writes = Writes(monkeypatch)
    events = recorder(app)
    lost = [True]

    def lose(ended: list[Completion]) -> None:
        if ended and lost:
            lost.clear()
            raise ConnectionResetError("reply lost")

    if committed:
        writes.after = lose
    else:
        writes.before = lose
    runs: dict[int, int] = {}

    @app.task("t", max_attempts=2, backoff=lambda _: timedelta(0))
    async def t(i: int) -> None:
        runs[i] = runs.get(i, 0) + 1
        if i % 2 and runs[i] == 1:
            raise ValueError("once")  # a retry due now: the lost write sent it back to queued

    await t.enqueue_many([{"i": i} for i in range(40)])
    assert await Worker(app, slots=8).run(burst=True) == 60
    assert not lost
    assert runs == {i: 1 + i % 2 for i in range(40)}
    rows = await fetch(database_url, "SELECT state, attempt, errors FROM akadze_jobs")
    assert all(r["state"] == "succeeded" for r in rows)
    assert sorted(len(_json(r["errors"])) for r in rows) == [0] * 20 + [1] * 20
    assert not [r for r in caplog.records if "outcome dropped" in r.getMessage()]
    assert await asyncio.to_thread(app.events.flush, 10.0)
    assert len([e for e in events if e.kind is Kind.ENDED]) == 60
    if committed:
        assert [r for r in caplog.records if "claimed by a claim whose reply was lost" in r.getMessage()]


async def test_outcomes_read_back_after_a_lost_reply_are_those_it_wrote_never_a_rescues(
    app: Akadze, database_url: str
) -> None:
    """find_written: a run that its own lost write ended counts as written, one still running
    does not; once its worker was declared lost (and registered again) no run counts, since a
    rescue may have ended it: its outcome is reported as fenced out, as any rescued run's."""

    @app.task("t")
    async def t(i: int) -> None: ...

    await t.enqueue_many([{"i": i} for i in range(2)])
    worker = Worker(app, slots=2)
    conn = await asyncpg.connect(plain(database_url))
    try:
        registration = dict(
            worker_id=worker.id, name="w", host="h", pid=1, queues=["default"], slots=2,
            lost_after_s=30.0, tasks=[("t", "default", t.args_fp)],
        )  # fmt: skip
        await Queries.register_worker(conn, **registration)
        mine, rescued = await Queries.claim(conn, ["default"], 2, worker.id)
        done = Transition(
            JobState.SUCCEEDED, 1, None, None, None, cancellable=True, verdict=Verdict.SUCCEEDED
        )
        ours = [Completion(mine.id, mine.run, done, None), Completion(rescued.id, rescued.run, done, None)]
        # the lost write ended the first run only
        await Queries.complete_batch(conn, ours[:1])
        found = await Queries.find_written(conn, worker.id, ours)
        assert [(job.id, job.run, job.state) for job in found] == [(mine.id, mine.run, JobState.SUCCEEDED)]
        # the worker is then declared lost, the second run rescued, the worker registered again
        await conn.execute("DELETE FROM akadze_workers WHERE id = $1", worker.id)
        lost = Transition(
            JobState.QUEUED, 1, 0.0, ErrorType.WORKER_LOST, "lost", cancellable=True, verdict=Verdict.LOST
        )
        assert (await Queries.complete_batch(conn, [Completion(rescued.id, rescued.run, lost, None)]))[0]
        await Queries.register_worker(conn, **registration)

        assert await Queries.complete_batch(conn, ours) == ([], [])  # fenced, both
        assert await Queries.find_written(conn, worker.id, ours) == []
        assert (
            await fetchval(database_url, "SELECT state FROM akadze_jobs WHERE id = $1", rescued.id)
            == "queued"
        )
    finally:
        await conn.close()


async def test_a_lone_outcome_is_written_at_once_when_no_claim_follows(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a claim that came back short no claim runs until a wake-up: the outcome is
    written by the completer at once, not held for the next poll."""
    writes = Writes(monkeypatch)
    ran = asyncio.Event()

    @app.task("t")
    async def t() -> None:
        ran.set()

    worker = Worker(app, slots=4, poll_interval=timedelta(seconds=30), listen=False)
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: worker.healthy and worker._heartbeat is not None)
        await asyncio.sleep(0.2)  # the first claim found nothing: no claim until the poll
        job = await t.enqueue()
        worker.wake()
        await asyncio.wait_for(ran.wait(), 10)
        await wait_until(
            lambda: fetchval(
                database_url, "SELECT state = 'succeeded' FROM akadze_jobs WHERE id = $1", job.id
            ),
            timeout=2.0,
        )
        assert [e.job_id for e in writes.alone] == [job.id] and writes.by_claim == []
    finally:
        worker.stop()
        await serving


async def test_a_graceful_stop_writes_every_outcome_before_the_worker_exits(
    app: Akadze, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Writes(monkeypatch)
    started = asyncio.Event()
    release = asyncio.Event()

    @app.task("t")
    async def t(i: int) -> None:
        started.set()
        await release.wait()

    await t.enqueue_many([{"i": i} for i in range(6)])
    worker = Worker(app, slots=6, poll_interval=timedelta(milliseconds=50))
    serving = asyncio.create_task(worker.run(handle_signals=False))
    await asyncio.wait_for(started.wait(), 10)
    await wait_until(lambda: len(worker._running) == 6)
    worker.stop()
    release.set()
    await serving
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'succeeded'") == 6


def test_claims_with_limits_do_not_write_outcomes(make_app: Callable[..., Akadze]) -> None:
    """claim_limited counts a group's running jobs from its snapshot, which would still see
    the outcomes it wrote as running: those claims leave the outcomes to the completer."""
    app = make_app()

    @app.task("free")
    async def free() -> None: ...

    assert choose_claim_completing(app, ["default"]) is Queries.claim_completing
    assert choose_claim_completing(app, [f"q{n}" for n in range(20)]) is Queries.claim_completing

    @app.task("limited", limit=Limit(concurrency=2))
    async def limited() -> None: ...

    assert choose_claim_completing(app, ["default"]) is None


async def test_claims_that_run_transition_hooks_do_not_write_outcomes(
    make_app: Callable[..., Akadze], monkeypatch: pytest.MonkeyPatch
) -> None:
    writes = Writes(monkeypatch)
    seen: list[tuple[int, JobState]] = []

    async def hook(conn: Any, job: Any, from_state: JobState, to_state: JobState) -> None:
        seen.append((job.id, to_state))

    app = make_app()
    app.hooks.on_transition.append(hook)

    @app.task("t")
    async def t(i: int) -> None: ...

    await t.enqueue_many([{"i": i} for i in range(12)])
    assert await Worker(app, slots=4).run(burst=True) == 12
    assert writes.by_claim == [] and len(writes.alone) == 12
    assert len([state for _, state in seen if state is JobState.SUCCEEDED]) == 12


async def test_the_completers_own_write_whose_reply_is_lost_reports_what_it_wrote(
    app: Akadze, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same read-back for the completer's own write (claims writing nothing here): written
    again after a lost reply, its outcomes change nothing and are reported as written."""
    caplog.set_level(logging.WARNING, logger="akadze.worker")
    writes = Writes(monkeypatch)
    real_complete = Queries.complete_batch  # the spy
    lost = [True]

    async def loses_a_reply(conn: Any, ended: Any) -> list[Completed]:
        written = await real_complete(conn, ended)
        if lost:
            lost.clear()
            raise ConnectionResetError("reply lost")
        return written

    monkeypatch.setattr(Queries, "complete_batch", staticmethod(loses_a_reply))
    events = recorder(app)

    @app.task("t")
    async def t(i: int) -> None: ...

    await t.enqueue_many([{"i": i} for i in range(20)])
    worker = Worker(app, slots=5)
    worker.fetcher.claim_completing = None
    assert await worker.run(burst=True) == 20
    assert not lost and writes.by_claim == []
    assert not [r for r in caplog.records if "outcome dropped" in r.getMessage()]
    assert await asyncio.to_thread(app.events.flush, 10.0)
    assert len([e for e in events if e.kind is Kind.ENDED]) == 20
