"""A workflow's graph as operators read it: its steps and edges, and what a step waits for."""

from __future__ import annotations

from akadze.db.graph import Waits, WorkflowView
from akadze.db.queries.connection import Connection, fetch
from akadze.db.sql import statement


class GraphQueries:
    """A workflow's graph as operators read it (`workflows show`, `jobs explain`, the dashboard)."""

    @staticmethod
    async def workflow_steps(conn: Connection, workflow_id: int) -> WorkflowView | None:
        """The workflow and its steps with their parents; None when there is no such workflow."""
        rows = await fetch(conn, statement("workflow_steps"), {"workflow_id": workflow_id})
        return WorkflowView.of(rows)

    @staticmethod
    async def waited_steps(conn: Connection, job_id: int, *, limit: int) -> Waits | None:
        """What job ``job_id`` waits for, naming at most ``limit`` parents; None unless it is a
        step parked for its parents."""
        rows = await fetch(conn, statement("waited_steps"), {"id": job_id, "limit": limit})
        return Waits.of(rows)
