"""Which claim statement a worker runs, and a claim inside a transaction that runs the
on_transition hooks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from akadze import hooks
from akadze.db.errors import is_transient
from akadze.db.queries import Queries
from akadze.flow import LimitParams, limit_params
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
    [Any, Sequence[str], int, str, Sequence[Completion]],
    Awaitable[tuple[list[Job], list[Completed], list[Completed]]],
]


#: a full group is looked at again after this many poll intervals: for a place freed where no
#: claim hears of it (every worker passes the limited jobs it ended, complete_tx's included, to
#: its next claim, which looks at their groups at once; a rescue, a worker that stops claiming
#: or a row changed by hand are found by this recheck). Many full groups (keys at their cap) are
#: then looked at a tenth as often as at every poll
RECHECK_POLLS = 10
#: after a claim that parked jobs, the next claim reads this many entries of each queue's index
#: beyond its size: a backlog of held jobs met at once is parked this many per claim, and the
#: claims that follow each other until it is all parked reach the ready jobs behind it sooner
PARK_BATCH = 1000


class LimitedClaim:
    """The claim of a worker whose tasks have limits (claim_limited.sql), with what it carries
    from one claim to the next: the limited jobs this worker ended since (their groups are
    looked at first: a place may be free), and whether the last claim parked jobs (then the
    next one reads further, and the fetcher claims again at once).

    Args:
        limits: the worker's tasks' limits, as the statement takes them.
        recheck_s: how long a full group waits before a claim looks at it again, when no end
            a claiming worker wrote tells it a place is free (a rescue, a worker that stopped
            claiming); RECHECK_POLLS poll intervals.
    """

    def __init__(self, limits: LimitParams, *, recheck_s: float) -> None:
        self.limits = limits
        self.recheck_s = recheck_s
        #: the last claim says more jobs may be ready at once: claim again
        self.more = False
        #: the last claim parked jobs: the next one reads further
        self._parked = False
        self._tasks = frozenset(limits.tasks)
        self._freed: list[int] = []

    def ended(self, jobs: Iterable[tuple[int, str]]) -> None:
        """These jobs (id, task) were written as ended: a place in their group may be free."""
        self._freed.extend(job_id for job_id, task in jobs if task in self._tasks)

    async def __call__(self, conn: Any, queues: Sequence[str], limit: int, worker_id: str) -> list[Job]:
        """Claim up to ``limit`` jobs of ``queues`` (the signature of every Claim)."""
        freed = self._freed
        jobs, self.more, self._parked = await Queries.claim_limited(
            conn,
            queues,
            limit,
            worker_id,
            self.limits,
            scan=limit + PARK_BATCH if self._parked else limit,
            freed=freed,
            recheck_s=self.recheck_s,
        )
        # only once the claim committed: a failed one leaves them for the next
        del freed[: len(freed)]
        return jobs


def choose_claim(app: Akadze, queues: Sequence[str], *, recheck_s: float = 1.0) -> Claim:
    """The claim a worker of ``app`` runs: a :class:`LimitedClaim` if some task has a Limit
    (``recheck_s``: the worker's poll interval), else claim (claim_completing writing nothing)."""
    limits = limit_params(
        {name: task.options.limit for name, task in app.tasks.items() if task.options.limit}
    )
    if limits is not None:
        return LimitedClaim(limits, recheck_s=recheck_s * RECHECK_POLLS)
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
