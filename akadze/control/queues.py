"""Queue pause: persisted in the database (akadze_queue_pauses), so every worker's next claim
skips a paused queue, across restarts, and a queue may be paused before it has any job.

Pausing stops claims only: running jobs finish, enqueue still works, and delayed jobs keep
their run_at. Both calls are idempotent and NOTIFY every listening worker at once; a worker
without notifications (behind a pooler in transaction mode) sees the change at its next poll.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from akadze.db.queries import Queries
from akadze.job import check_name

if TYPE_CHECKING:
    from akadze.app import Akadze


async def pause_queue(app: Akadze, name: str) -> bool:
    """Pause ``name``; returns True when it was not paused before."""
    check_name("queue", name)
    async with app.engine.begin() as conn:
        return await Queries.pause_queue(conn, name)


async def resume_queue(app: Akadze, name: str) -> bool:
    """Resume ``name``; returns True when it was paused before."""
    check_name("queue", name)
    async with app.engine.begin() as conn:
        return await Queries.resume_queue(conn, name)
