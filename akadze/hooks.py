"""Calling the app's hooks: sync or async functions, in the order they were added."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from akadze.db.queries import Queries
from akadze.job import Job, JobState
from akadze.outcomes import Completed

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from akadze.app import TransitionHook


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
    for job in await Queries.get_jobs(conn, [w.id for w in written]):
        await transition(hooks, conn, job, from_state)
