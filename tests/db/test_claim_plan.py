"""The claim keeps its index when the table holds a million finished jobs (DESIGN.md: ordering by
anything but the index's columns lets the planner walk every finished row after ANALYZE), and
the pruner finds old finished jobs through its own index."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg

from akadze.db.sql import statement
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


def _scans(node: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    """Every (node type, relation, index) in a JSON plan."""
    found = [(node["Node Type"], node.get("Relation Name"), node.get("Index Name"))]
    for child in node.get("Plans", []):
        found += _scans(child)
    return found


async def _plan(conn: asyncpg.Connection, name: str, *args: Any) -> list[tuple[str, str | None, str | None]]:
    raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {statement(name).pg}", *args)
    plan = json.loads(raw) if isinstance(raw, str) else raw
    return _scans(plan[0]["Plan"])


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
            claim = await _plan(conn, "claim", ["default", "mail"], 10, str(uuid.uuid4()))
            # the claim index finds the rows; the primary key joins them to the update
            indexes = {index for _, relation, index in claim if relation == "akadze_jobs" and index}
            assert indexes <= {"akadze_jobs_claim_idx", "akadze_jobs_pkey"}, (mode, claim)
            assert ("Index Scan", "akadze_jobs", "akadze_jobs_claim_idx") in claim, (mode, claim)
            assert not any(kind == "Seq Scan" and relation == "akadze_jobs" for kind, relation, _ in claim)

            prune = await _plan(conn, "prune_jobs", 7 * 86400.0, 1000, 1)
            assert ("Index Scan", "akadze_jobs", "akadze_jobs_prune_idx") in prune, (mode, prune)
            assert not any(kind == "Seq Scan" and relation == "akadze_jobs" for kind, relation, _ in prune)
    finally:
        await conn.close()
