"""Waiting steps cost the claim nothing (issue 29, point 3): with 100,000 of them parked, the
claim statement, writing the outcomes of workflow steps or of plain jobs, reads the claim index
and primary keys only, and the edges by index, in its generic plan as in a custom one."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from akadze.db.sql import statement
from tests.db.test_claim_plan import _ended, _plan
from tests.support import plain

WAITING = 100_000

_LOAD = f"""
WITH wf AS (INSERT INTO akadze_workflows (name) VALUES ('big') RETURNING id),
root AS (
    INSERT INTO akadze_jobs (
        task, queue, state, attempt, run, workflow_id, step, deps_left, after_failure, worker_id
    )
    SELECT 'bulk', 'default', 'running', 1, 1, wf.id, 'root', 0, 'cancel', gen_random_uuid() FROM wf
    RETURNING id, workflow_id
),
waiting AS (
    INSERT INTO akadze_jobs (task, queue, workflow_id, step, deps_left, after_failure, parked)
    SELECT 'bulk', 'default', root.workflow_id, 's' || n, 2, 'cancel', 'deps'
    FROM root, generate_series(1, {WAITING}) AS n
    RETURNING id
)
-- every waiting step waits for a parent of its own (a step of the past), and one in a thousand
-- for the root too: 100,100 edges
INSERT INTO akadze_job_deps (parent_id, child_id)
SELECT -waiting.id, waiting.id FROM waiting
UNION ALL
SELECT root.id, waiting.id FROM root, waiting WHERE waiting.id % 1000 = 0
"""


def _args(batch: str) -> list[object]:
    values = {
        "queues": ["default"],
        "limit": 10,
        "worker_id": str(uuid.uuid4()),
        "many_queues": 8,
        "max_errors": 20,
        "batch": batch,
    }
    return [values[param] for param in statement("claim_completing").params]


@pytest.mark.parametrize("mode", ["auto", "force_generic_plan"])
async def test_the_claim_reads_no_waiting_step_and_probes_the_edges_by_index(
    database_url: str, mode: str
) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        await conn.execute(_LOAD)
        await conn.execute(
            "INSERT INTO akadze_jobs (task, queue) SELECT 'plain', 'default' FROM generate_series(1, 100)"
        )
        await conn.execute("ANALYZE")
        await conn.execute(f"SET plan_cache_mode = {mode}")
        root = await conn.fetchval("SELECT id FROM akadze_jobs WHERE step = 'root'")
        done = json.dumps([_ended(root) | {"state": "failed", "delay_s": 0.0}])
        for batch in ("[]", done):
            plan = await _plan(conn, "claim_completing", *_args(batch))
            indexes = {index for _, relation, index in plan if relation == "akadze_jobs" and index}
            assert "akadze_jobs_parked_idx" not in indexes, plan
            scanned = {relation for kind, relation, _ in plan if kind == "Seq Scan"}
            assert not scanned & {"akadze_jobs", "akadze_job_deps"}, plan
            assert indexes <= {"akadze_jobs_claim_idx", "akadze_jobs_pkey", "akadze_jobs_running_idx"}, plan
    finally:
        await conn.close()
