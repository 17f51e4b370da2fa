"""Which claim statement a worker runs, and a claim inside a transaction that runs the
on_transition hooks."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from akadze import hooks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.flow import limit_params
from akadze.job import Job, JobState
from akadze.outcomes import Completed, Completion

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.worker.connection import HeldConnection

logger = logging.getLogger("akadze.worker")

#: a claim statement: (connection, queues, limit, worker_id) -> the jobs it took
Claim = Callable[[Any, Sequence[str], int, str], Awaitable[list[Job]]]
#: a claim that first writes outcomes: (..., outcomes) -> the jobs it took, the jobs it wrote
ClaimCompleting = Callable[
    [Any, Sequence[str], int, str, Sequence[Completion]], Awaitable[tuple[list[Job], list[Completed]]]
]


def choose_claim(app: Akadze, queues: Sequence[str]) -> Claim:
    """The claim a worker of ``app`` runs: claim_limited if some task has a Limit, else claim
    (claim_completing writing nothing)."""
    limits = limit_params(
        {name: task.options.limit for name, task in app.tasks.items() if task.options.limit}
    )
    if limits is not None:
        return functools.partial(Queries.claim_limited, limits=limits)
    return Queries.claim


def choose_claim_completing(app: Akadze, queues: Sequence[str]) -> ClaimCompleting | None:
    """The claim that writes the waiting outcomes in its own statement (claim_completing), or
    None for a worker whose claim is claim_limited, which counts a group's running jobs from
    its snapshot and would see the outcomes it writes as still running."""
    if any(task.options.limit for task in app.tasks.values()):
        return None
    return Queries.claim_completing


async def claim_with_hooks(
    app: Akadze, held: HeldConnection, claim: Claim, queues: Sequence[str], free: int, worker_id: str
) -> list[Job]:
    """``claim`` in a transaction that also runs the app's on_transition hooks for each job it
    claimed. A hook that fails rolls back the claim with the hook's own writes, and the jobs
    are claimed again without hooks: a broken hook must not stop the queue."""
    conn = await held.get()
    on_transition = app.hooks.on_transition
    try:
        async with conn.begin():
            jobs = await claim(conn, queues, free, worker_id)
            for job in jobs:
                await hooks.transition(on_transition, conn, job, JobState.QUEUED)
    except Exception as exc:
        if is_transient(exc):
            raise
        logger.exception("an on_transition hook failed at claim; claiming without hooks")
        return await claim(await held.raw(), queues, free, worker_id)
    return jobs
