-- prune_jobs: deletes up to :limit finished jobs (succeeded, failed, cancelled) whose
-- finished_at is more than :retention_s seconds old by the database's clock, oldest first;
-- relies on akadze_jobs_prune_idx, then primary key lookups. Runs as its own short
-- transaction: only the holder of the transaction-scoped advisory lock :lock_key deletes
-- ({prune_lock}, db/sql.py: one pruner at a time, and no session state, so it passes PgBouncer
-- in transaction mode); rows locked by anyone else are skipped (SKIP LOCKED), never waited on.
-- Returns whether the lock was taken and how many rows went ({prune_reply}).
WITH {prune_lock},
doomed AS (
    SELECT j.id
    FROM akadze_jobs AS j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled')
        AND j.finished_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
        AND (SELECT pruner.locked FROM pruner)
    ORDER BY j.finished_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM akadze_jobs AS j
    USING doomed
    WHERE j.id = doomed.id
    RETURNING j.id
)
{prune_reply}
