"""The app's hooks: their types, the lists an app keeps, and calling them (sync or async
functions, in the order they were added)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.job import Job, JobState
from akadze.outcomes import Completed

#: on_enqueue hook: (connection, job), sync or async; runs in the enqueue's transaction
EnqueueHook: TypeAlias = Callable[[AsyncConnection, Job], Awaitable[None] | None]
#: before_run / after_run hook: (job), sync or async
RunHook: TypeAlias = Callable[[Job], Awaitable[None] | None]
#: on_transition hook: (connection, job, from_state, to_state), sync or async; runs in the
#: transition's transaction and can veto it by raising
TransitionHook: TypeAlias = Callable[[AsyncConnection, Job, JobState, JobState], Awaitable[None] | None]


@dataclass
class Hooks:
    """The app's four lists of hooks (``app.hooks``); each hook may be sync or async.

    A hook sees jobs, never their arguments' meaning: it must not log arguments or results.
    """

    on_enqueue: list[EnqueueHook] = field(default_factory=list)
    before_run: list[RunHook] = field(default_factory=list)
    after_run: list[RunHook] = field(default_factory=list)
    on_transition: list[TransitionHook] = field(default_factory=list)


async def call(hooks: Sequence[Callable[..., object]], *args: Any) -> None:
    """Call each hook with ``args`` in order, awaiting those that return an awaitable."""
    for hook in hooks:
        value = hook(*args)
        if inspect.isawaitable(value):
            await value


async def transition(
    hooks: Sequence[TransitionHook], conn: AsyncConnection, job: Job, from_state: JobState
) -> None:
    """Run on_transition hooks for one job, in the transaction that changed its state."""
    await call(hooks, conn, job, from_state, job.state)


async def transitions_written(
    hooks: Sequence[TransitionHook], conn: AsyncConnection, written: Sequence[Completed], from_state: JobState
) -> None:
    """Run on_transition hooks for jobs a slim write returned: their whole rows are read first,
    in the same transaction."""
    if not hooks or not written:
        return
    from akadze.db.queries import Queries  # the queries import the job's codec; hooks are imported first

    for job in await Queries.get_jobs(conn, [w.id for w in written]):
        await transition(hooks, conn, job, from_state)
