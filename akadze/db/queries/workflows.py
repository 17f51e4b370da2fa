"""The workflow statements: enqueue a whole graph, read and cancel a workflow, a step's
parents' results (docs/workflows.md)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec
from msgspec.structs import replace

from akadze.codec.stored import decode_stored, row_to_job
from akadze.db.queries.connection import Connection, fetch
from akadze.db.queries.enqueue import NewJobs, _new_job
from akadze.db.sql import statement
from akadze.errors import WorkflowError
from akadze.events.trace_context import split
from akadze.job import Job, JobState


class NewStep(msgspec.Struct, frozen=True):
    """One step to insert: its name, its job's columns, its encoded arguments, its parents."""

    step: str
    new: NewJobs
    args: str
    after: tuple[str, ...]
    after_failure: str


class WorkflowQueries:
    """The statements of workflows: enqueue, read, cancel (one method per .sql file)."""

    @staticmethod
    async def enqueue_workflow(
        conn: Connection, name: str | None, steps: Sequence[NewStep], trace_context: str | None = None
    ) -> dict[str, Job]:
        """Every step and edge in one statement; step name -> its new Job.

        Raises:
            WorkflowError: a step name given twice (nothing is sent): the one place that keeps
                a step's name unique in its workflow, as no index does (migration 0017).
        """
        names = [s.step for s in steps]
        if len(set(names)) != len(names):
            twice = next(name for name in names if names.count(name) > 1)
            raise WorkflowError(twice, f"a step named {twice!r} is given twice; name each step once")
        trace, parent = split(trace_context)
        params: dict[str, Any] = {
            "name": name,
            "trace_context": trace,
            "trace_parent": parent,
            "steps": names,
            "tasks": [s.new.task for s in steps],
            "queues": [s.new.queue for s in steps],
            "priorities": [s.new.priority for s in steps],
            "args": [s.args for s in steps],
            "args_fps": [s.new.args_fp for s in steps],
            "max_attempts": [s.new.max_attempts for s in steps],
            "run_ats": [s.new.run_at for s in steps],
            "delays": [s.new.delay_s for s in steps],
            "expires_ats": [s.new.expires_at for s in steps],
            "deps_lefts": [len(s.after) for s in steps],
            "after_failures": [s.after_failure for s in steps],
            "edge_parent": [parent_step for s in steps for parent_step in s.after],
            "edge_child": [s.step for s in steps for _ in s.after],
        }
        rows = await fetch(conn, statement("enqueue_workflow"), params)
        by_step = {s.step: s for s in steps}
        jobs: dict[str, Job] = {}
        for row in rows:
            step = by_step[row["step"]]
            job = _new_job(step.new, row, step.args)
            jobs[step.step] = replace(job, workflow_id=row["workflow_id"], step=step.step)
        return {s.step: jobs[s.step] for s in steps}

    @staticmethod
    async def get_workflow(conn: Connection, workflow_id: int) -> dict[str, Job]:
        """The workflow's steps by name, in id order (empty: no such workflow, or pruned)."""
        rows = await fetch(conn, statement("get_workflow"), {"workflow_id": workflow_id})
        return {row["step"]: row_to_job(row, json_text=True) for row in rows}

    @staticmethod
    async def cancel_workflow(conn: Connection, workflow_id: int) -> list[tuple[Job, JobState]]:
        """Each unfinished step cancelled (queued) or marked (running), with its previous state."""
        rows = await fetch(conn, statement("cancel_workflow"), {"workflow_id": workflow_id})
        return [(row_to_job(row, json_text=True), JobState(row["from_state"])) for row in rows]

    @staticmethod
    async def dependency_results(conn: Connection, job_id: int) -> dict[str, Any]:
        """The results of the succeeded parents of step ``job_id``, by step name (JSON)."""
        rows = await fetch(conn, statement("dependency_results"), {"id": job_id})
        return {row["step"]: None if row["result"] is None else decode_stored(row["result"]) for row in rows}

    @staticmethod
    async def step_dependents(conn: Connection, step_id: int) -> Sequence[Any]:
        """The steps after step ``step_id`` a requeue may take back, locked, one row per edge
        into them (akadze/control/steps.py reads them)."""
        return await fetch(conn, statement("step_dependents"), {"id": step_id})

    @staticmethod
    async def step_parents(conn: Connection, ids: Collection[int]) -> dict[int, str]:
        """The state of each of the steps ``ids`` (the parents of the steps a requeue takes
        back), read after step_dependents' locks are held."""
        rows = await fetch(conn, statement("step_parents"), {"ids": sorted(ids)})
        return {row["id"]: row["state"] for row in rows}

    @staticmethod
    async def repark_steps(
        conn: Connection, counts: Mapping[int, int], added: Collection[int]
    ) -> list[tuple[Job, bool]]:
        """Park again the steps of ``counts`` (id -> parents to wait for, or to add for those in
        ``added``); each as written, and whether it was added to."""
        ids = sorted(counts)
        params = {"ids": ids, "counts": [counts[i] for i in ids], "added": [i in added for i in ids]}
        rows = await fetch(conn, statement("repark_steps"), params)
        return [(row_to_job(row, json_text=True), bool(row["added"])) for row in rows]
