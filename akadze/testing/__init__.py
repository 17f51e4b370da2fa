"""Helpers for users' tests, over real rows and the real worker code: drain, assert_enqueued,
assert_not_enqueued, and bound() to point an app at a throwaway database. The pytest plugin
(akadze.testing.plugin, entry point ``akadze``) builds its fixtures on these."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from akadze.codec import encode_json
from akadze.db.queries import Queries
from akadze.job import Job, JobState

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.client import RemoteTask
    from akadze.task import Task

#: show argument values in assertion messages (off: arguments may hold secrets). The pytest
#: plugin sets it from ``--akadze-show-args``.
SHOW_ARGS = False
#: the most jobs an assertion reads (tests hold few)
_LIMIT = 100_000


async def drain(
    app: Akadze,
    queues: Sequence[str] | None = None,
    *,
    slots: int = 10,
    delayed: bool = False,
    max_rounds: int = 100,
) -> int:
    """Run every ready job of ``queues`` (default: all of the app's) until none is ready.

    Jobs that become ready while draining (a retry without delay, a follow-up enqueued by a
    task) run too. With ``delayed=True``, jobs waiting for their run_at (retries with a
    backoff, snoozes, delayed enqueues) are made ready at once and run, round after round,
    until no job of the queues is left queued; a task that snoozes for good raises
    RuntimeError after ``max_rounds`` rounds. Returns the number of runs.
    """
    from akadze.worker import Worker

    def burst() -> Worker:
        return Worker(
            app,
            queues=queues,
            slots=slots,
            poll_interval=timedelta(milliseconds=200),
            heartbeat_interval=timedelta(seconds=5),
            lost_after=timedelta(seconds=30),
            listen=False,
        )

    runs = await burst().run(burst=True, handle_signals=False)
    if not delayed:
        return runs
    served = set(queues if queues is not None else app.queues())
    for _ in range(max_rounds):
        async with app.engine.connect() as conn:
            waiting = [
                job
                for job in await Queries.list_jobs(conn, state=JobState.QUEUED, limit=_LIMIT)
                if job.queue in served
            ]
            made_ready = [await Queries.run_now(conn, job.id) for job in waiting]
            await conn.commit()
        if not any(made_ready) and not waiting:
            return runs
        runs += await burst().run(burst=True, handle_signals=False)
    raise RuntimeError(
        f"drain(delayed=True): jobs were still queued after {max_rounds} rounds "
        "(a task that snoozes or retries for good?)"
    )


@asynccontextmanager
async def bound(app: Akadze, database_url: str) -> AsyncIterator[Akadze]:
    """Point ``app`` at ``database_url`` for the block, then back at its own engine.

    For apps built at import time on the service's database: inside the block its tasks
    enqueue, its workers claim and ``app.engine`` connects to the test database. The engine
    made for the block is disposed at its end. Not for an app that is serving meanwhile.
    """
    from akadze.app import create_engine
    from akadze.db.raw import RawConnections

    saved = (app._engine, app._owns_engine, app.raw_connections)
    engine = create_engine(database_url)
    app._engine, app._owns_engine = engine, True
    app.raw_connections = RawConnections(engine, keep=2)
    try:
        yield app
    finally:
        await app.raw_connections.close()
        await engine.dispose()
        app._engine, app._owns_engine, app.raw_connections = saved
        _forget_placements(app)


def _forget_placements(app: Akadze) -> None:
    # a task keeps its default enqueue placement (the app's engine) once built
    for task in app.tasks.values():
        task._forget()


async def enqueued(app: Akadze, task: Task[Any, Any] | RemoteTask[Any] | str, /, **args: Any) -> list[Job]:
    """The jobs of ``task`` (in any state) whose arguments include ``args``, oldest first.

    Arguments compare as the worker reads them: for a Task of ``app`` the stored JSON is
    decoded into the declared types (models, datetimes, UUIDs compare as themselves); for a
    task name or a generated client's task, ``args`` are compared as JSON.
    """
    name = task if isinstance(task, str) else task.name
    async with app.engine.connect() as conn:
        jobs = await Queries.list_jobs(conn, task=name, limit=_LIMIT)
        await conn.rollback()
    return [job for job in reversed(jobs) if _matches(app, name, job, args)]


async def assert_enqueued(
    app: Akadze, task: Task[Any, Any] | RemoteTask[Any] | str, /, **args: Any
) -> list[Job]:
    """Fail unless a job of ``task`` with these arguments (a subset of its arguments) exists,
    in any state: enqueued and not yet run, or already run by ``drain``. Returns the jobs.

    The message says what was enqueued instead: task names and counts, and the argument
    names of the task's jobs; values only with ``--akadze-show-args`` (or SHOW_ARGS).
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    found = await enqueued(app, task, **args)
    if not found:
        raise AssertionError(await _instead(app, task, args, "expected a job of"))
    return found


async def assert_not_enqueued(
    app: Akadze, task: Task[Any, Any] | RemoteTask[Any] | str, /, **args: Any
) -> None:
    """Fail if a job of ``task`` with these arguments (a subset of its arguments) exists."""
    __tracebackhide__ = True
    found = await enqueued(app, task, **args)
    if found:
        name = task if isinstance(task, str) else task.name
        raise AssertionError(
            f"expected no job of {name!r}{_described(args)}, found {len(found)}: "
            + ", ".join(f"job {job.id} ({job.state.value}){_shown(job.args)}" for job in found[:10])
        )


def _matches(app: Akadze, name: str, job: Job, expected: Mapping[str, Any]) -> bool:
    if not expected:
        return True
    if any(key not in job.args for key in expected):
        return False
    own = app.tasks.get(name)
    if own is not None:
        try:
            stored = own.codec.decode(msgspec.json.encode(job.args))
        except Exception:  # a row this task cannot read matches nothing
            return False
        return all(stored.get(key) == value for key, value in expected.items())
    try:
        wanted = msgspec.json.decode(encode_json(dict(expected)))
    except Exception as exc:
        raise TypeError(f"cannot compare the arguments given for {name!r} as JSON: {exc}") from None
    return all(job.args[key] == value for key, value in wanted.items())


async def _instead(
    app: Akadze, task: Task[Any, Any] | RemoteTask[Any] | str, args: Mapping[str, Any], lead: str
) -> str:
    name = task if isinstance(task, str) else task.name
    async with app.engine.connect() as conn:
        every = await Queries.list_jobs(conn, limit=_LIMIT)
        await conn.rollback()
    lines = [f"{lead} {name!r}{_described(args)}, found none."]
    if not every:
        lines.append("No job was enqueued at all.")
        return "\n".join(lines)
    counts = Counter(job.task for job in every)
    lines.append("Enqueued instead: " + ", ".join(f"{task} x{n}" for task, n in sorted(counts.items())))
    same = [job for job in reversed(every) if job.task == name]
    for job in same[:10]:
        lines.append(f"  {name} job {job.id} ({job.state.value}) with {_shown(job.args).strip() or '{}'}")
    if len(same) > 10:
        lines.append(f"  ... and {len(same) - 10} more")
    return "\n".join(lines)


def _described(args: Mapping[str, Any]) -> str:
    if not args:
        return ""
    return " with " + _shown(dict(args)).strip()


def _shown(args: Mapping[str, Any]) -> str:
    """The argument names, and their values only when SHOW_ARGS is on."""
    if not args:
        return ""
    if SHOW_ARGS:
        return " " + ", ".join(f"{key}={value!r}" for key, value in sorted(args.items()))
    return " arguments " + ", ".join(sorted(args)) + " (values hidden: --akadze-show-args)"
