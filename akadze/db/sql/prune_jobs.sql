-- prune_jobs: deletes up to :limit finished jobs (succeeded, failed, cancelled) whose
-- finished_at is more than :retention_s seconds old by the database's clock, oldest first;
-- relies on akadze_jobs_prune_idx, then primary key lookups. Runs as its own short
-- transaction: only the holder of the transaction-scoped advisory lock :lock_key deletes
-- ({prune_lock}, db/sql.py: one pruner at a time, and no session state, so it passes PgBouncer
-- in transaction mode); rows locked by anyone else are skipped (SKIP LOCKED), never waited on.
-- Returns whether the lock was taken and how many rows went ({prune_reply}).
-- A finished workflow step stays while its workflow has an unfinished step (one probe of
-- akadze_jobs_workflow_open_idx per finished step): a waiting step still needs its parents'
-- results, and the workflow's page its graph. A step goes with the edges into it (every edge has
-- its child: none is left once the workflow's steps are gone), a workflow's row with its last
-- step (its steps found through akadze_jobs_workflow_open_idx and akadze_jobs_workflow_done_idx,
-- every state spelled as the two predicates).
WITH {prune_lock},
doomed AS (
    SELECT j.id
    FROM akadze_jobs AS j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled')
        AND j.finished_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
        AND (SELECT pruner.locked FROM pruner)
        AND (
            j.workflow_id IS NULL
            OR NOT EXISTS (
                SELECT 1
                FROM akadze_jobs AS o
                WHERE o.workflow_id = j.workflow_id
                    AND o.state IN ('queued', 'running')
            )
        )
    ORDER BY j.finished_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM akadze_jobs AS j
    USING doomed
    WHERE j.id = doomed.id
    RETURNING j.id, j.workflow_id
),
edges_gone AS (
    DELETE FROM akadze_job_deps AS d
    WHERE d.child_id = ANY (ARRAY(SELECT gone.id FROM gone WHERE gone.workflow_id IS NOT NULL))
),
workflows_gone AS (
    DELETE FROM akadze_workflows AS w
    WHERE w.id IN (SELECT gone.workflow_id FROM gone)
        AND NOT EXISTS (
            SELECT 1
            FROM akadze_jobs AS s
            WHERE s.workflow_id = w.id
                AND (s.state IN ('queued', 'running') OR s.state IN ('succeeded', 'failed', 'cancelled'))
                AND s.id NOT IN (SELECT gone.id FROM gone)
        )
)
{prune_reply}
