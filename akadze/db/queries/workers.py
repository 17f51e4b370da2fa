"""Workers' rows: registration, heartbeat, the lost and their orphaned jobs, who serves what."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import statement
from akadze.db.stats import LiveWorker


class Orphan(msgspec.Struct, frozen=True):
    """A running job whose worker is gone, as the rescue reads it: never its arguments or result."""

    id: int
    task: str
    queue: str
    attempt: int
    max_attempts: int
    run: int
    worker_id: str | None


class LiveTask(msgspec.Struct, frozen=True):
    """A task a live worker published at registration (live_task_schemas)."""

    worker_id: str
    worker_name: str
    #: the queues the worker serves
    worker_queues: tuple[str, ...]
    #: None for a worker that published no task
    task: str | None
    queue: str | None
    args_fp: str | None


def register_params(
    worker_id: str,
    name: str,
    host: str,
    pid: int,
    queues: Sequence[str],
    slots: int,
    lost_after_s: float,
    tasks: Sequence[tuple[str, str, str]] = (),
) -> dict[str, Any]:
    """register_worker's parameters (the heartbeat process runs the statement too)."""
    return {
        "id": worker_id,
        "name": name,
        "host": host,
        "pid": pid,
        "queues": list(queues),
        "slots": slots,
        "lost_after_s": lost_after_s,
        "task_names": [t[0] for t in tasks],
        "task_queues": [t[1] for t in tasks],
        "task_fps": [t[2] for t in tasks],
    }


def beat_statements(
    worker_id: str, registration: Mapping[str, Any]
) -> tuple[tuple[str, list[Any]], tuple[str, list[Any]]]:
    """heartbeat's and register_worker's statements, raw form, with their arguments: for the
    heartbeat process, which loads no akadze (akadze/worker/beat.py)."""
    heartbeat, register = statement("heartbeat"), statement("register_worker")
    beat_params, register_params_ = {"id": worker_id}, register_params(**registration)
    return (
        (heartbeat.pg, [beat_params[name] for name in heartbeat.params]),
        (register.pg, [register_params_[name] for name in register.params]),
    )


class WorkerQueries:
    """The statements of workers' rows (Queries' area for the worker's registration, heartbeat
    and rescuer, and the operators' views)."""

    @staticmethod
    async def register_worker(conn: Connection, **registration: Any) -> None:
        """Takes register_params's arguments. Also publishes ``tasks``, (name, queue, args_fp)
        each, for ``akadze codegen verify``."""
        await execute(conn, statement("register_worker"), register_params(**registration))

    @staticmethod
    async def live_task_schemas(conn: Connection) -> list[LiveTask]:
        """What live workers serve and run; one row with ``task`` None for a worker that
        published no task (an older akadze)."""
        rows = await fetch(conn, statement("live_task_schemas"), {})
        return [
            LiveTask(str(r["worker_id"]), r["name"], tuple(r["queues"]), r["task"], r["queue"], r["args_fp"])
            for r in rows
        ]

    @staticmethod
    async def heartbeat(conn: Connection, worker_id: str) -> bool:
        """False when this worker's row is gone: it was declared lost."""
        return bool(await fetch(conn, statement("heartbeat"), {"id": worker_id}))

    @staticmethod
    async def unregister_worker(conn: Connection, worker_id: str) -> None:
        """Delete the worker's row on a graceful exit, so it no longer counts as live; its running
        jobs, if any, become orphans for the rescuer."""
        await execute(conn, statement("unregister_worker"), {"id": worker_id})

    @staticmethod
    async def forget_lost_workers(conn: Connection) -> list[str]:
        """Delete the workers whose heartbeat is older than their own ``lost_after_s`` (database clock);
        returns their ids. Their running jobs become orphans that find_orphans returns."""
        rows = await fetch(conn, statement("forget_lost_workers"), {})
        return [str(row["id"]) for row in rows]

    @staticmethod
    async def find_orphans(conn: Connection, limit: int) -> list[Orphan]:
        """Up to ``limit`` running jobs whose worker is gone, for the rescuer to end or retry; rows
        locked by a stalled run are skipped, and arguments and results are never read."""
        rows = await fetch(conn, statement("find_orphans"), {"limit": limit})
        return [
            Orphan(
                r["id"],
                r["task"],
                r["queue"],
                r["attempt"],
                r["max_attempts"],
                r["run"],
                str(r["worker_id"]) if r["worker_id"] is not None else None,
            )
            for r in rows
        ]

    @staticmethod
    async def live_workers(conn: Connection, max_ids: int = 100) -> list[LiveWorker]:
        """Every live worker with its queues, slots, heartbeat age and running jobs (the first
        ``max_ids`` ids of them; 0 for counts only); reads only."""
        return [LiveWorker.of(r) for r in await fetch(conn, statement("live_workers"), {"max_ids": max_ids})]
