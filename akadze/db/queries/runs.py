"""The worker's hot path: claim, complete, and what a run reads and writes on the way."""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Sequence
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncConnection

from akadze.codec.stored import STATES, row_to_job
from akadze.db.errors import is_transient
from akadze.db.prepared import prepared
from akadze.db.queries.connection import Connection, execute, fetch
from akadze.db.sql import Statement, statement
from akadze.flow import LimitParams
from akadze.job import Job
from akadze.outcomes import Completed, Completion

logger = logging.getLogger("akadze.worker")

#: past this many queues claim_completing.sql walks one index over every queue (its second
#: branch) rather than each queue's own (docs/worker.md has the measurements behind the number)
MANY_QUEUES = 8
#: a job keeps at most this many error entries, the newest
MAX_ERRORS = 20
#: an error entry's message is cut to this many characters
MAX_ERROR_MESSAGE = 2000

#: a claim connection makes its generic plans again this often (DISCARD PLANS): a plan made
#: while the table was small (a sequential scan of a few pages) must not outlive the table's
#: growth by more than this, whether or not an ANALYZE comes to invalidate it
REPLAN_S = 60.0
#: raw connections that claimed: when generic_plans.sql set their session, or their plans
#: were last discarded (monotonic); None behind a pooler, where nothing is set
_planned: weakref.WeakKeyDictionary[Any, float | None] = weakref.WeakKeyDictionary()


class RunQueries:
    """The worker's statements for claiming, completing and recovering runs (Queries' hot path)."""

    @staticmethod
    async def claim_completing(
        conn: Connection,
        queues: Sequence[str],
        limit: int,
        worker_id: str | None,
        ended: Sequence[Completion],
        *,
        many_queues: int | None = None,
        settle: bool = False,
    ) -> tuple[list[Job], list[Completed], list[Completed]]:
        """Write the outcomes ``ended``, then claim up to ``limit`` ready jobs of ``queues``, in
        one statement and one commit (claim_completing.sql): the jobs claimed, the jobs
        written (the fenced-out are absent), and the workflow steps their ends (or the claim's
        cancels) released or cancelled. Past ``many_queues`` queues the claim walks one
        index over all of them (tests and benchmarks force either way through it). When no
        outcome may be a workflow step (Completion.plain), a plain form does it (no settle
        step, one way of reading the ready jobs: claim_completing_plain, or
        claim_completing_plain_many past ``many_queues`` queues), unless ``settle`` (their
        second claim)."""
        params = _completing_params(queues, limit, worker_id, ended, many_queues)
        if not settle and all(e.plain for e in ended):
            if len(params["queues"]) <= params["many_queues"]:
                return await RunQueries.claim_completing_plain(conn, params)
            return await RunQueries.claim_completing_plain_many(conn, params)
        return _claimed_and_written(await _claim(conn, statement("claim_completing"), params))[:3]

    @staticmethod
    async def claim_completing_plain(
        conn: Connection, params: dict[str, Any]
    ) -> tuple[list[Job], list[Completed], list[Completed]]:
        """claim_completing, with its parameters ``params``, for outcomes none of which is a
        workflow step and a worker of up to ``params["many_queues"]`` queues, without the
        costs of the settle step and of the walk over every queue
        (claim_completing_plain.sql; :func:`_claim_plain` says what happens to a step passed
        over)."""
        return await _claim_plain(conn, statement("claim_completing_plain"), params)

    @staticmethod
    async def claim_completing_plain_many(
        conn: Connection, params: dict[str, Any]
    ) -> tuple[list[Job], list[Completed], list[Completed]]:
        """claim_completing_plain for a worker of more than ``params["many_queues"]`` queues
        (claim_completing_plain_many.sql: one walk over every queue)."""
        return await _claim_plain(conn, statement("claim_completing_plain_many"), params)

    @staticmethod
    async def claim(conn: Connection, queues: Sequence[str], limit: int, worker_id: str) -> list[Job]:
        """Claim up to ``limit`` ready jobs of ``queues`` (claim_completing, writing nothing)."""
        jobs, _, _ = await RunQueries.claim_completing(conn, queues, limit, worker_id, ())
        return jobs

    @staticmethod
    async def claim_limited(
        conn: Connection,
        queues: Sequence[str],
        limit: int,
        worker_id: str,
        limits: LimitParams,
        *,
        scan: int | None = None,
        freed: Sequence[int] = (),
        recheck_s: float = 1.0,
    ) -> tuple[list[Job], bool, bool]:
        """claim, for a worker whose tasks have limits (claim_limited.sql): a job whose limit is
        full is parked, out of the claim index, and taken again once its group has room. Reads
        ``scan`` entries of each queue's index (default ``limit``), the parked jobs of the due
        groups and of those of the jobs ``freed`` (limited jobs this worker ended since its last
        claim); a full group is looked at again ``recheck_s`` later. Returns the jobs claimed,
        whether more may be ready at once (claim again), and whether the claim parked jobs (the
        next claim then reads further: ready jobs may stand behind more held ones)."""
        params = _claim_params(queues, limit, worker_id) | {
            "l_task": limits.tasks,
            "l_key": limits.keys,
            "l_conc": limits.concurrency,
            "l_rate": limits.rate,
            "l_per": limits.per_s,
            "scan": limit if scan is None else max(scan, limit),
            "freed": list(freed),
            "recheck_s": recheck_s,
        }
        rows = await _claim(conn, statement("claim_limited"), params)
        jobs = [row_to_job(row, json_text=True) for row in rows if row["id"] is not None]
        more = [row["more"] for row in rows if row["id"] is None]
        return jobs, bool(more), any(more)

    @staticmethod
    async def generic_plans(conn: Connection) -> None:
        """Set a direct claim connection's session to plan claims once (generic plans, no JIT); never
        sent behind a pooler. _claim calls it on a connection's first claim."""
        await execute(conn, statement("generic_plans"), {})

    @staticmethod
    async def discard_plans(conn: Connection) -> None:
        """Make a claim connection plan its statements again at their next run, so a plan made for a
        small table does not outlive its growth (every REPLAN_S); the statements stay prepared."""
        await execute(conn, statement("discard_plans"), {})

    @staticmethod
    async def complete_batch(
        conn: Connection, ended: Sequence[Completion]
    ) -> tuple[list[Completed], list[Completed]]:
        """Write the outcomes ``ended`` (claim_completing, claiming nothing): what still owns its
        job is applied; returns the jobs as written (the fenced-out are absent), and the
        workflow steps their ends released or cancelled."""
        _, written, settled = await RunQueries.claim_completing(conn, (), 0, None, ended)
        return written, settled

    @staticmethod
    async def find_written(conn: Connection, worker_id: str, ended: Sequence[Completion]) -> list[Completed]:
        """Of ``ended``, sent by a write whose reply was lost, the ones it wrote (find_written.sql)."""
        params = {"ids": [e.job_id for e in ended], "runs": [e.run for e in ended], "worker_id": worker_id}
        return [_completed(r) for r in await fetch(conn, statement("find_written"), params)]

    @staticmethod
    async def set_result(conn: Connection, job_id: int, run: int, result: str) -> None:
        """Store a task's return value after complete_tx committed its job; fenced by ``run``, so a run
        that lost its job writes nothing."""
        await execute(conn, statement("set_result"), {"id": job_id, "run": run, "result": result})

    @staticmethod
    async def cancel_requests(conn: Connection, worker_id: str) -> list[int]:
        """The running jobs of ``worker_id`` that have a cancel request."""
        return [
            row["id"] for row in await fetch(conn, statement("cancel_requests"), {"worker_id": worker_id})
        ]

    @staticmethod
    async def find_claimed(conn: Connection, worker_id: str, known: Sequence[int]) -> list[Job]:
        """Running jobs of ``worker_id`` other than ``known``: claimed by a claim whose reply was lost."""
        rows = await fetch(conn, statement("find_claimed"), {"worker_id": worker_id, "known": list(known)})
        return [row_to_job(row, json_text=True) for row in rows]


async def _claim_plain(
    conn: Connection, stmt: Statement, params: dict[str, Any]
) -> tuple[list[Job], list[Completed], list[Completed]]:
    """Run ``stmt``, a plain form of claim_completing. A workflow step that ends at its claim is
    passed over there: if one was, the jobs left to claim are claimed at once by
    claim_completing with no outcomes, which ends it and settles the steps after it.

    That second statement runs after the first committed (on an autocommitting connection): a
    transient error in it is raised, as a claim whose reply was lost (the worker reads back
    what the first wrote and claimed); any other leaves the step queued for a later claim, and
    this returns what the first did."""
    jobs, written, settled, passed = _claimed_and_written(await _claim(conn, stmt, params))
    if passed:
        try:
            more, _, settled = await RunQueries.claim_completing(
                conn,
                params["queues"],
                params["limit"] - len(jobs),
                params["worker_id"],
                (),
                many_queues=params["many_queues"],
                settle=True,
            )
        except Exception as exc:
            if isinstance(conn, AsyncConnection) or is_transient(exc):
                raise
            logger.warning(
                "claiming a workflow step that ends at its claim failed (%s); a later claim takes it",
                type(exc).__name__,
            )
            more = []
        jobs += more
    return jobs, written, settled


async def _claim(conn: Connection, stmt: Statement, params: dict[str, Any]) -> Sequence[Any]:
    """Run the claim statement ``stmt``: on a direct connection prepared and planned once
    per REPLAN_S (generic_plans.sql says why), behind a pooler as it comes."""
    if not isinstance(conn, AsyncConnection):
        now = time.monotonic()
        try:
            planned = _planned[conn]
        except KeyError:
            planned = None
            if await prepared(conn, stmt) is not None:
                await RunQueries.generic_plans(conn)
                planned = now
            _planned[conn] = planned
        if planned is not None and now - planned > REPLAN_S:
            await RunQueries.discard_plans(conn)
            _planned[conn] = now
    return await fetch(conn, stmt, params)


def _claim_params(queues: Sequence[str], limit: int, worker_id: str | None) -> dict[str, Any]:
    """What every claim statement takes: the queues, how many jobs at most, and who claims."""
    return {"queues": list(queues), "limit": limit, "worker_id": worker_id}


def _completing_params(
    queues: Sequence[str],
    limit: int,
    worker_id: str | None,
    ended: Sequence[Completion],
    many_queues: int | None,
) -> dict[str, Any]:
    """claim_completing's parameters (either form): the claim's, the outcomes', and past how
    many queues the claim walks one index over all of them."""
    params = _claim_params(queues, limit, worker_id) | _batch_params(ended)
    params["many_queues"] = MANY_QUEUES if many_queues is None else many_queues
    return params


def _claimed_and_written(
    rows: Sequence[Any],
) -> tuple[list[Job], list[Completed], list[Completed], bool]:
    """claim_completing's rows (either form) as the jobs claimed, the jobs written, the steps
    settled, and whether a job was passed over (the plain form's last row, id NULL)."""
    claimed = [row_to_job(row, json_text=True) for row in rows if row["written"] is False]
    written = [_completed(row) for row in rows if row["written"]]
    # written NULL: a workflow step the ends released or cancelled (none outside workflows), or
    # the plain form's row saying it passed over a step that ends at its claim
    settled: list[Completed] = []
    passed = False
    if len(rows) > len(claimed) + len(written):
        settled = [_completed(row) for row in rows if row["written"] is None and row["id"] is not None]
        passed = any(row["id"] is None for row in rows)
    return claimed, written, settled, passed


def _completed(row: Any) -> Completed:
    return Completed(
        row["id"],
        row["task"],
        row["queue"],
        STATES[row["state"]],
        row["attempt"],
        row["run"],
        row["run_at"],
    )


def _batch_params(ended: Sequence[Completion]) -> dict[str, Any]:
    """The parameters of the outcomes ``ended`` (claim_completing.sql's ``done``)."""
    rows_out = [
        _CompletionRow(
            e.job_id,
            e.run,
            e.transition.state.value,
            e.transition.attempt,
            e.transition.delay_s,
            msgspec.Raw(e.result.encode()) if e.result is not None else None,
            _error_entry(e),
            e.transition.cancellable,
            e.transition.priority,
        )
        for e in ended
    ]
    return {"max_errors": MAX_ERRORS, "batch": _batch_encoder.encode(rows_out).decode()}


class _ErrorEntry(msgspec.Struct):
    attempt: int
    type: str
    message: str


class _CompletionRow(msgspec.Struct):
    """One element of the outcomes' JSON batch; the names are the recordset's columns."""

    id: int
    run: int
    state: str
    attempt: int
    delay_s: float | None
    result: msgspec.Raw | None
    error: _ErrorEntry | None
    cancellable: bool
    priority: int | None


_batch_encoder = msgspec.json.Encoder()


def _error_entry(ended: Completion) -> _ErrorEntry | None:
    c = ended.transition
    if c.error_type is None:
        return None
    message = c.error_message or ""
    if len(message) > MAX_ERROR_MESSAGE:
        message = message[:MAX_ERROR_MESSAGE] + " [truncated]"
    return _ErrorEntry(c.attempt, c.error_type, message)
