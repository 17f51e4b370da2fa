"""A workflow's graph as operators see it (workflow_steps.sql, waited_steps.sql): typed rows, and
each step's level (pure). `akadze workflows show`, `jobs explain` and the dashboard's workflow
page read these; the JSON of ``workflows show --output json`` is :class:`WorkflowView`'s fields.
No IO here: Queries fetches the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec

from akadze.job import JobState


class StepView(msgspec.Struct, frozen=True):
    """One step of a workflow: its job's state and the steps it waits for (never arguments)."""

    id: int
    step: str
    task: str
    queue: str
    state: JobState
    #: queued and parked until its parents have finished (deps_left of them still count)
    waiting: bool
    #: its parents that have not finished yet (not succeeded, for after_failure "cancel")
    deps_left: int
    #: what a parent's failure or cancel does to it: "cancel" or "run"
    after_failure: str
    attempt: int
    max_attempts: int
    cancel_requested: bool
    run_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    #: the type of its last recorded error (say "akadze.DependencyFailed"); None without one
    error_type: str | None
    #: the step names it waits for (its parents), in id order
    after: tuple[str, ...]
    #: the steps' ids it waits for, in id order
    after_ids: tuple[int, ...]


class WorkflowView(msgspec.Struct, frozen=True):
    """A workflow and its steps, parents first (``workflows show --output json``)."""

    id: int
    name: str | None
    created_at: datetime
    steps: tuple[StepView, ...]

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> WorkflowView | None:
        """From workflow_steps.sql's rows: None when there is none (no such workflow)."""
        if not rows:
            return None
        first = rows[0]
        names = {int(row["id"]): str(row["step"]) for row in rows if row["id"] is not None}
        steps = tuple(
            StepView(
                id=int(row["id"]),
                step=str(row["step"]),
                task=row["task"],
                queue=row["queue"],
                state=JobState(row["state"]),
                waiting=bool(row["waiting"]),
                deps_left=int(row["deps_left"] or 0),
                after_failure=row["after_failure"] or "cancel",
                attempt=int(row["attempt"]),
                max_attempts=int(row["max_attempts"]),
                cancel_requested=bool(row["cancel_requested"]),
                run_at=row["run_at"],
                started_at=row["started_at"],
                finished_at=row["finished_at"],
                error_type=row["error_type"],
                # a parent pruned from under its child (never while the workflow has an
                # unfinished step) is named by its id
                after=tuple(names.get(parent, f"#{parent}") for parent in row["parents"]),
                after_ids=tuple(int(parent) for parent in row["parents"]),
            )
            for row in rows
            if row["id"] is not None
        )
        return cls(int(first["workflow_id"]), first["name"], first["workflow_created_at"], steps)

    def counts(self) -> dict[str, int]:
        """Steps per state, in JobState's order, "waiting" apart from the other queued ones;
        states with no step are left out."""
        found: dict[str, int] = {}
        for step in self.steps:
            key = "waiting" if step.waiting else step.state.value
            found[key] = found.get(key, 0) + 1
        order = ["waiting", *(state.value for state in JobState)]
        return {key: found[key] for key in order if key in found}

    @property
    def unfinished(self) -> int:
        """Steps a cancel of the workflow would take: queued (waiting or not) and running."""
        return sum(1 for step in self.steps if step.state in (JobState.QUEUED, JobState.RUNNING))


def levels(steps: Iterable[StepView]) -> dict[int, int]:
    """Each step's level, by job id: 0 for a step that waits for nothing, else one more than its
    highest parent's. Parents outside ``steps`` are ignored; a cycle (never enqueued: Workflow
    refuses one) leaves its steps at the level reached before it. Linear in steps and edges."""
    given = list(steps)
    known = {step.id for step in given}
    parents = {step.id: [p for p in step.after_ids if p in known] for step in given}
    children: dict[int, list[int]] = {step.id: [] for step in given}
    left = {step_id: len(found) for step_id, found in parents.items()}
    for step_id, found in parents.items():
        for parent in found:
            children[parent].append(step_id)
    level = dict.fromkeys(parents, 0)
    ready = [step_id for step_id, count in left.items() if count == 0]
    while ready:
        step_id = ready.pop()
        for child in children[step_id]:
            level[child] = max(level[child], level[step_id] + 1)
            left[child] -= 1
            if left[child] == 0:
                ready.append(child)
    return level


class WaitedStep(msgspec.Struct, frozen=True):
    """A parent a step still waits for."""

    id: int
    step: str
    state: JobState


class Waits(msgspec.Struct, frozen=True):
    """What a waiting step waits for (waited_steps.sql): the parents not finished yet, the
    first few of them (``steps``) and how many there are (``unfinished``)."""

    workflow_id: int
    deps_left: int
    after_failure: str
    steps: tuple[WaitedStep, ...]
    unfinished: int

    @classmethod
    def of(cls, rows: Sequence[Mapping[str, Any]]) -> Waits | None:
        """None unless the job is a step parked for its parents."""
        if not rows or not rows[0]["waiting"] or rows[0]["workflow_id"] is None:
            return None
        first = rows[0]
        steps = tuple(
            WaitedStep(int(row["parent_id"]), str(row["step"]), JobState(row["state"]))
            for row in rows
            if row["parent_id"] is not None
        )
        return cls(
            int(first["workflow_id"]),
            int(first["deps_left"] or 0),
            first["after_failure"] or "cancel",
            steps,
            int(first["unfinished"] or 0),
        )
