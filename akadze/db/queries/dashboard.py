"""What only the dashboard reads or writes: the key of its CSRF tokens, and the finished jobs an
operator deletes."""

from __future__ import annotations

from collections.abc import Sequence

from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import statement


class DashboardQueries:
    """The statements of the dashboard alone (Queries' area for web/)."""

    @staticmethod
    async def web_secret(conn: Connection) -> str | None:
        """The key that signs the dashboard's CSRF tokens (migration 0013); None when its row
        is missing (make_web_secret makes it)."""
        rows = await fetch(conn, statement("web_secret"), {})
        return str(rows[0]["secret"]) if rows else None

    @staticmethod
    async def make_web_secret(conn: Connection) -> None:
        """Makes the key when its row is missing; an existing key is kept."""
        await execute(conn, statement("make_web_secret"), {})

    @staticmethod
    async def delete_finished_jobs(conn: Connection, ids: Sequence[int]) -> list[int]:
        """Deletes the jobs of ``ids`` that are finished (succeeded, failed, cancelled); returns
        the ids deleted. A job that is queued or running, or gone, is left alone."""
        rows = await fetch(conn, statement("delete_finished_jobs"), {"ids": list(ids)})
        return [int(row["id"]) for row in rows]
