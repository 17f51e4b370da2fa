"""Calling the app's hooks: sync or async functions, in the order they were added."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from akadze.db.queries import Queries, Written
from akadze.job import Job, JobState

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from akadze.app import TransitionHook


async def maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value


async def transition(
    hooks: Sequence[TransitionHook], conn: AsyncConnection, job: Job, from_state: JobState
) -> None:
    """Run on_transition hooks for one job, in the transaction that changed its state."""
    for hook in hooks:
        await maybe_await(hook(conn, job, from_state, job.state))


async def transitions_written(
    hooks: Sequence[TransitionHook], conn: AsyncConnection, written: Sequence[Written], from_state: JobState
) -> None:
    """Run on_transition hooks for jobs a slim write returned: their whole rows are read first,
    in the same transaction."""
    if not hooks or not written:
        return
    for job in await Queries.get_jobs(conn, [w.id for w in written]):
        await transition(hooks, conn, job, from_state)
