"""A requeued workflow step takes back the steps its end had cancelled: which ones, and how
many parents each waits for again (``reparked``: pure), and the two statements that do it.

A step ``F`` that ended failed or cancelled cancelled its waiting dependents (DependencyFailed),
level by level. Requeued, ``F`` runs again, so they wait again: every step cancelled by a
dependency whose parents are all succeeded, unfinished, or taken back along with it, is queued
and parked with ``deps_left`` = its parents not succeeded. A dependent cancelled by another
failed parent as well stays cancelled (no parent would release it), and so do the steps after
it. A step still waiting that had counted ``F`` (or a step taken back) as finished, because it
runs whatever its parents' end (after_failure "run"), waits for it again. Steps that were
released, ran or were cancelled otherwise are not touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.db.queries import Queries
from akadze.errors import WorkflowError
from akadze.job import Job, JobState
from akadze.outcomes import ErrorType

#: a parent in one of these states will not end again by itself (unless requeued)
_ENDED_OTHERWISE = frozenset({JobState.FAILED.value, JobState.CANCELLED.value})


@dataclass
class Dependent:
    """A step after the requeued one, as step_dependents.sql reads it."""

    state: str
    parked: str | None
    after_failure: str | None
    last_error: str | None
    #: parent id -> its state
    parents: dict[int, str] = field(default_factory=dict)

    @property
    def cancelled_by_dependency(self) -> bool:
        """Cancelled, while it waited, by a parent's end (a step with after_failure "cancel")."""
        return (
            self.state == JobState.CANCELLED.value
            and self.last_error == ErrorType.DEPENDENCY_FAILED.value
            and self.after_failure == "cancel"
        )

    @property
    def waits_whatever(self) -> bool:
        """Still waiting, for parents whose end does not matter (after_failure "run")."""
        return self.state == JobState.QUEUED.value and self.parked == "deps" and self.after_failure == "run"


def reparked(root: int, dependents: Mapping[int, Dependent]) -> tuple[dict[int, int], dict[int, int]]:
    """For a requeue of step ``root``: (step id -> the parents it waits for again, for the steps
    taken back; step id -> the parents to add, for the steps still waiting). Pure."""
    back = {root}
    candidates = {i for i, d in dependents.items() if d.cancelled_by_dependency}
    grown = True
    while grown:  # a step may become takeable once another parent of its is taken back
        grown = False
        for step in sorted(candidates - back):
            parents = dependents[step].parents
            if any(p in back for p in parents) and all(
                p in back or state not in _ENDED_OTHERWISE for p, state in parents.items()
            ):
                back.add(step)
                grown = True
    waits = {
        step: sum(1 for p, state in dependents[step].parents.items() if state != JobState.SUCCEEDED.value)
        for step in back - {root}
    }
    added = {
        step: n
        for step, d in dependents.items()
        if step not in back and d.waits_whatever and (n := sum(1 for p in d.parents if p in back))
    }
    return waits, added


def dependents_of(rows: Iterable[Mapping[str, Any]], parents: Mapping[int, str]) -> dict[int, Dependent]:
    """step_dependents.sql's rows (one per edge) as one Dependent per step, with each parent's
    state from ``parents`` (step_parents.sql)."""
    found: dict[int, Dependent] = {}
    for row in rows:
        step = found.get(row["id"])
        if step is None:
            step = found[row["id"]] = Dependent(
                row["state"], row["parked"], row["after_failure"], row["last_error"]
            )
        step.parents[row["parent_id"]] = parents[row["parent_id"]]
    return found


async def read_committed(conn: AsyncConnection, step: Job) -> None:
    """Raise WorkflowError unless ``conn``'s transaction is READ COMMITTED: the requeue of
    ``step`` reads the states of the parents of the steps after it once those steps are locked
    (step_parents.sql), which a snapshot taken before the locks cannot do."""
    isolation = (await conn.exec_driver_sql("SHOW transaction_isolation")).scalar_one()
    if isolation != "read committed":
        raise WorkflowError(
            step=step.step,
            message=(
                f"requeue of workflow step {step.id} needs a READ COMMITTED transaction (this one"
                f" is {str(isolation).upper()}): the states of the parents of the steps after it"
                " must be read as they are once those steps are locked, which a snapshot older"
                " than the locks cannot do"
            ),
        )


async def repark_dependents(conn: AsyncConnection, step: Job) -> list[tuple[Job, JobState]]:
    """After ``step`` was requeued in ``conn``'s transaction: take back the steps after it
    (the module's docstring says which). Returns the steps taken back, with their state before.
    ``conn``'s transaction is READ COMMITTED (read_committed checked it)."""
    rows = await Queries.step_dependents(conn, step.id)
    # the parents' states in a statement of their own, after the locks: a parent that ended
    # while this waited for one is read as it ended (step_parents.sql)
    parents = await Queries.step_parents(conn, {row["parent_id"] for row in rows})
    dependents = dependents_of(rows, parents)
    waits, added = reparked(step.id, dependents)
    if not waits and not added:
        return []
    moved = await Queries.repark_steps(conn, {**waits, **added}, set(added))
    return [(job, JobState(dependents[job.id].state)) for job, was_added in moved if not was_added]
