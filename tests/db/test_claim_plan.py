"""The claim keeps its index when the table holds a million finished jobs (DESIGN.md: ordering by
anything but the index's columns lets the planner walk every finished row after ANALYZE), never
reads the delayed jobs (whatever their priority: an idle claim reads a few dozen buffers), and
takes the ready jobs in claim order across priorities and queues; the pruner finds old finished
jobs through its own index."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from akadze import Akadze
from akadze.db.queries import Queries
from akadze.db.queries.runs import MANY_QUEUES
from akadze.db.sql import statement
from akadze.testing import drain
from akadze.worker import Worker
from tests.support import plain

FINISHED = 1_000_000
QUEUED = 1_000

_LOAD = f"""
INSERT INTO akadze_jobs (task, queue, state, attempt, run, created_at, run_at, started_at, finished_at)
SELECT
    'bulk',
    (ARRAY['default', 'mail', 'reports'])[1 + n % 3],
    (ARRAY['succeeded', 'failed', 'cancelled'])[1 + n % 3],
    1,
    1,
    now() - make_interval(secs => n),
    now() - make_interval(secs => n),
    now() - make_interval(secs => n),
    now() - make_interval(secs => n) + interval '1 second'
FROM generate_series(1, {FINISHED}) AS n
"""

_QUEUED = f"""
INSERT INTO akadze_jobs (task, queue, run_at)
SELECT 'bulk', (ARRAY['default', 'mail'])[1 + n % 2], now() - make_interval(secs => n)
FROM generate_series(1, {QUEUED}) AS n
"""


#: the claim's two branches (claim_completing.sql): one queue at a time, and one walk across
#: every queue past MANY_QUEUES; the index each must read, and the many_queues that forces it
#: (whatever the number of queues)
CLAIMS = {"claim": "akadze_jobs_claim_idx", "claim_many": "akadze_jobs_claim_many_idx"}
_FORCE = {"claim": 2**31 - 1, "claim_many": 0}


def _claim_args(name: str, queues: list[str], limit: int, worker_id: str, batch: str = "[]") -> list[Any]:
    """claim_completing's arguments for ``name``'s branch: the claim alone unless ``batch``."""
    values = {"queues": queues, "limit": limit, "worker_id": worker_id, "many_queues": _FORCE[name]}
    values |= {"max_errors": 20, "batch": batch}
    return [values[param] for param in statement("claim_completing").params]


def _ended(job_id: int) -> dict[str, Any]:
    """One outcome as complete_batch's JSON batch spells it (a retry with an error entry)."""
    error = {"attempt": 1, "type": "ValueError", "message": "boom"}
    return {
        "id": job_id,
        "run": 1,
        "state": "queued",
        "attempt": 1,
        "delay_s": 1.0,
        "result": None,
        "error": error,
        "cancellable": True,
        "priority": None,
    }


def _scans(node: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """Every (node type, relation, index) in a JSON plan."""
    found = [(node["Node Type"], node.get("Relation Name"), node.get("Index Name"))]
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


def _buffers(node: dict[str, Any]) -> int:
    """Shared buffers a plan node touched (hit or read), its children included."""
    return int(node["Shared Hit Blocks"] + node["Shared Read Blocks"])


def _ran(node: dict[str, Any]) -> dict[str, Any]:
    """A plan (EXPLAIN ANALYZE) without the nodes that never ran: the branch of the claim its
    queues did not take is in the plan, cut by its constant condition."""
    kept = [_ran(child) for child in node.get("Plans", []) if child.get("Actual Loops", 1) > 0]
    if node["Node Type"] == "Sort" and node.get("Actual Rows") == 0:
        # the other branch's sort above its cut input: it sorts no job
        return {**node, "Node Type": "Sort (of nothing)", "Plans": kept}
    return {**node, "Plans": kept}


async def _plan(conn: asyncpg.Connection, name: str, *args: Any) -> list[tuple[str, str | None, str | None]]:
    """Every (node type, relation, index) that ran in the plan of statement ``name``: run
    under EXPLAIN ANALYZE and rolled back."""
    tx = conn.transaction()
    await tx.start()
    try:
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement(name).pg}", *args)
    finally:
        await tx.rollback()
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return _scans(_ran(plan[0]["Plan"]))


async def test_claim_uses_the_claim_index_with_a_million_finished_rows(database_url: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute(_LOAD)
        await conn.execute(_QUEUED)
        await conn.execute("ANALYZE akadze_jobs")
        assert await conn.fetchval("SELECT count(*) FROM akadze_jobs WHERE state <> 'queued'") == FINISHED

        for mode in ("auto", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            for name, index in CLAIMS.items():
                args = _claim_args(name, ["default", "mail"], 10, str(uuid.uuid4()))
                claim = await _plan(conn, "claim_completing", *args)
                # the claim's index finds the rows; the primary key joins them to the update
                indexes = {index for _, relation, index in claim if relation == "akadze_jobs" and index}
                assert indexes <= {index, "akadze_jobs_pkey"}, (mode, claim)
                assert ("Index Scan", "akadze_jobs", index) in claim, (mode, claim)
                assert not any(kind == "Seq Scan" and rel == "akadze_jobs" for kind, rel, _ in claim)
                if name == "claim_many":
                    # one ordered scan over every queue: a sort would mean reading every ready job
                    assert not any(kind == "Sort" for kind, _, _ in claim), (mode, claim)

            for name, index in CLAIMS.items():
                # the outcomes' rows are found by primary key or among the running jobs (a small
                # index), the claimed ones by the claim's index
                batch = json.dumps([_ended(n) for n in range(1, 40, 3)])
                args = _claim_args(name, ["default", "mail"], 10, str(uuid.uuid4()), batch)
                plan = await _plan(conn, "claim_completing", *args)
                indexes = {index for _, relation, index in plan if relation == "akadze_jobs" and index}
                assert indexes <= {index, "akadze_jobs_pkey", "akadze_jobs_running_idx"}, (mode, plan)
                assert indexes & {"akadze_jobs_pkey", "akadze_jobs_running_idx"}, (mode, plan)
                assert ("Index Scan", "akadze_jobs", index) in plan, (mode, plan)
                assert not any(kind == "Seq Scan" and rel == "akadze_jobs" for kind, rel, _ in plan)

            prune = await _plan(conn, "prune_jobs", 7 * 86400.0, 1000, 1)
            assert ("Index Scan", "akadze_jobs", "akadze_jobs_prune_idx") in prune, (mode, prune)
            assert not any(kind == "Seq Scan" and relation == "akadze_jobs" for kind, relation, _ in prune)
    finally:
        await conn.close()


async def test_each_claim_reads_its_own_index_even_before_any_statistics(database_url: str) -> None:
    # two indexes hold the queued jobs in claim order; claim.sql, which names one queue per scan,
    # must never be planned on the queue-less one (it would read every queue's jobs), nor
    # the walk across queues on the per-queue one (it would sort every ready job)
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue) "
            "SELECT 'bulk', 'q' || (n % 10) FROM generate_series(1, 300) AS n"
        )
        for mode in ("auto", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            for name, own in CLAIMS.items():
                plan = await _plan(
                    conn, "claim_completing", *_claim_args(name, ["q1", "q2"], 10, str(uuid.uuid4()))
                )
                indexes = {index for _, relation, index in plan if relation == "akadze_jobs" and index}
                assert indexes <= {own, "akadze_jobs_pkey"}, (mode, name, plan)
                assert ("Index Scan", "akadze_jobs", own) in plan, (mode, name, plan)
    finally:
        await conn.close()


async def _kept_plan(conn: asyncpg.Connection, name: str) -> str:
    """The plan the claim connection keeps for its prepared claim statement, as ``name``'s
    branch runs it (the branch not taken cut out)."""
    prepared = await conn.fetchval(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE $1", "__akadze_claim_completing_%"
    )
    assert prepared is not None, await conn.fetch("SELECT name FROM pg_prepared_statements")
    args = _claim_args(name, ["default"], 10, str(uuid.uuid4()))
    tx = conn.transaction()
    await tx.start()
    try:
        # EXECUTE takes no parameters: the arguments as literals (constants of this test)
        literals = ", ".join(
            "'{" + ",".join(arg) + "}'"
            if isinstance(arg, list)
            else repr(arg)
            if isinstance(arg, str)
            else str(arg)
            for arg in args
        )
        raw = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {prepared}({literals})")
    finally:
        await tx.rollback()
    plan = _ran((json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"])
    return "\n".join(f"{kind} on {relation}" for kind, relation, _ in _scans(plan) if relation)


@pytest.mark.parametrize("name", list(CLAIMS))
async def test_a_claim_connection_makes_its_plan_again_as_the_table_grows(
    database_url: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim connection keeps one generic plan (generic_plans.sql): made on a table of a few
    rows it reads the table sequentially, which must not last once the table has grown, even
    without an ANALYZE: every REPLAN_S the plans are discarded and made again."""
    from akadze.db.queries import runs

    conn = await asyncpg.connect(plain(database_url))

    async def claim(conn: asyncpg.Connection, queues: list[str], limit: int, worker_id: str) -> None:
        await Queries.claim_completing(conn, queues, limit, worker_id, (), many_queues=_FORCE[name])

    try:
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue) SELECT 'bulk', 'default' FROM generate_series(1, 3)"
        )
        await claim(conn, ["default"], 1, str(uuid.uuid4()))
        assert "Seq Scan on akadze_jobs" in await _kept_plan(conn, name)  # three rows: as it should be
        await conn.execute("SET synchronous_commit = off")
        await conn.execute(_LOAD.replace(str(FINISHED), "200000"))
        await claim(conn, ["default"], 1, str(uuid.uuid4()))
        assert "Seq Scan on akadze_jobs" in await _kept_plan(conn, name)  # kept: no ANALYZE came

        monkeypatch.setattr(runs, "REPLAN_S", 0.0)
        await claim(conn, ["default"], 1, str(uuid.uuid4()))
        plan = await _kept_plan(conn, name)
        assert "Seq Scan on akadze_jobs" not in plan, plan
        assert "Tid Scan on akadze_jobs" in plan, plan
    finally:
        await conn.close()


DELAYED = 100_000

_DELAYED = f"""
INSERT INTO akadze_jobs (task, queue, run_at, priority)
SELECT 'bulk', 'default', now() + interval '1 hour' + make_interval(secs => n), $1
FROM generate_series(1, {DELAYED}) AS n
"""


async def _explain_claim(
    conn: asyncpg.Connection, name: str, queues: list[str], limit: int
) -> tuple[int, int, str]:
    """(rows claimed, shared buffers touched, the plan as text) of one claim, rolled back."""
    tx = conn.transaction()
    await tx.start()
    try:
        raw = await conn.fetchval(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {statement('claim_completing').pg}",
            *_claim_args(name, queues, limit, str(uuid.uuid4())),
        )
    finally:
        await tx.rollback()
    plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
    return int(plan["Actual Rows"]), _buffers(plan), json.dumps(plan)


@pytest.mark.parametrize(
    "delayed_priority", [1, 0, -1], ids=["delayed-above", "delayed-level", "delayed-below"]
)
@pytest.mark.parametrize("name", list(CLAIMS))
async def test_the_claim_never_reads_the_delayed_jobs_whatever_their_priority(
    database_url: str, delayed_priority: int, name: str
) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute(_DELAYED, delayed_priority)
        await conn.execute("VACUUM ANALYZE akadze_jobs")
        for mode in ("auto", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            await conn.execute("SET jit = off")
            # idle: nothing is ready, 100,000 jobs wait in the claimed queue's index (a scan of
            # them, as the claim did before it walked the priorities, reads about 600 buffers)
            rows, buffers, plan = await _explain_claim(conn, name, ["default"], 50)
            assert rows == 0
            assert buffers <= 40, (mode, buffers, plan)
        await conn.execute("RESET plan_cache_mode")
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue, priority) "
            "SELECT 'bulk', 'default', 0 FROM generate_series(1, 2000)"
        )
        await conn.execute("ANALYZE akadze_jobs")
        rows, buffers, plan = await _explain_claim(conn, name, ["default"], 50)
        assert rows == 50
        # the 50 jobs' entries and rows, locked then updated: the delayed entries are not read
        assert buffers <= 700, (buffers, plan)
        assert f'"Index Name": "{CLAIMS[name]}"' in plan
        assert ("Seq Scan", "akadze_jobs", None) not in _scans(json.loads(plan))
    finally:
        await conn.close()


@pytest.mark.parametrize("name", list(CLAIMS))
async def test_the_claim_takes_ready_jobs_across_priorities_and_queues_in_claim_order(
    database_url: str, name: str
) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        # (label, queue, priority, seconds from now): negative is ready, positive is delayed
        jobs = [
            ("a2-late", "a", 2, -10),
            ("a2-early", "a", 2, -20),
            ("a2-delayed", "a", 2, 600),
            ("a1-delayed", "a", 1, 600),
            ("b1", "b", 1, -5),
            ("a0", "a", 0, -30),
            ("b0-delayed", "b", 0, 600),
            ("b0", "b", 0, -40),
            ("a-5", "a", -5, -50),
            ("c9", "c", 9, -1),
        ]
        ids = {}
        for label, queue, priority, seconds in jobs:
            ids[label] = await conn.fetchval(
                "INSERT INTO akadze_jobs (task, queue, priority, run_at) "
                "VALUES ('t', $1, $2, now() + make_interval(secs => $3)) RETURNING id",
                queue,
                priority,
                float(seconds),
            )
        by_id = {v: k for k, v in ids.items()}

        async def claim(queues: list[str], limit: int) -> list[str]:
            tx = conn.transaction()
            await tx.start()
            try:
                rows = await conn.fetch(
                    statement("claim_completing").pg, *_claim_args(name, queues, limit, str(uuid.uuid4()))
                )
            finally:
                await tx.rollback()
            return sorted((by_id[r["id"]] for r in rows), key=[label for label, *_ in jobs].index)

        # one queue, several priorities in one claim; the delayed jobs (a1 has none ready) are skipped
        assert await claim(["a"], 3) == ["a2-late", "a2-early", "a0"]
        order = ["a2-early", "a2-late", "a0", "a-5"]
        for limit in range(1, 6):
            assert set(await claim(["a"], limit)) == set(order[:limit])
        # across queues: priority, then run_at, then id; c is not served
        across = ["a2-early", "a2-late", "b1", "b0", "a0", "a-5"]
        for limit in range(1, 8):
            assert set(await claim(["a", "b"], limit)) == set(across[:limit])
        # a paused queue gives nothing
        await conn.execute("INSERT INTO akadze_queue_pauses (queue) VALUES ('a')")
        assert set(await claim(["a", "b"], 3)) == {"b1", "b0"}
    finally:
        await conn.close()


async def test_a_claim_over_a_thousand_queues_reads_one_scan_not_a_probe_per_queue(database_url: str) -> None:
    queues = [f"q{n}" for n in range(1000)]
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue) "
            "SELECT 'bulk', 'q' || (n % 1000) FROM generate_series(1, 5000) AS n"
        )
        await conn.execute("ANALYZE akadze_jobs")
        rows, many, plan = await _explain_claim(conn, "claim_many", queues, 50)
        assert rows == 50
        # the 50 jobs' entries and rows, locked then updated (about 600 buffers with claim.sql's
        # single queue): nothing per queue
        assert many <= 800, (many, plan)
        rows, per_queue, _ = await _explain_claim(conn, "claim", queues, 50)
        assert rows == 50
        assert per_queue > 5 * many  # a probe and up to :limit locks per queue
    finally:
        await conn.close()


def test_a_worker_of_many_queues_claims_with_one_scan_over_them() -> None:
    app = Akadze(database_url="postgresql://localhost/unused")
    few = [f"q{n}" for n in range(MANY_QUEUES)]
    assert Worker(app, queues=few).fetcher.claim is Queries.claim
    assert Worker(app, queues=[*few, "one-more"]).fetcher.claim is Queries.claim
    # one statement, two branches: past MANY_QUEUES queues its second (one scan) runs
    assert "<= CAST(:many_queues AS integer)" in statement("claim_completing").source


async def test_a_worker_of_many_queues_runs_them_in_claim_order_and_skips_a_paused_one(
    make_app: Callable[..., Akadze],
) -> None:
    app = make_app()
    order: list[str] = []
    queues = [f"q{n}" for n in range(MANY_QUEUES + 2)]
    tasks = {}
    for queue in queues:

        @app.task(f"t.{queue}", queue=queue)
        async def run(label: str) -> None:
            order.append(label)

        tasks[queue] = run
    assert len(Worker(app).queues) > MANY_QUEUES
    await tasks["q3"].using(priority=1).enqueue(label="q3-p1")
    await tasks["q0"].enqueue(label="q0-p0-first")
    await tasks["q9"].using(priority=5, delay=timedelta(hours=1)).enqueue(label="q9-delayed")
    await tasks["q5"].using(priority=2).enqueue(label="q5-p2")
    await tasks["q7"].using(priority=9).enqueue(label="q7-paused")
    await tasks["q1"].enqueue(label="q1-p0-second")
    await app.pause_queue("q7")
    assert await drain(app, slots=1) == 4
    assert order == ["q5-p2", "q3-p1", "q0-p0-first", "q1-p0-second"]
