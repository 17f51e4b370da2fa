-- prune_schedule_runs: deletes up to :limit schedule runs recorded more than :retention_s
-- seconds ago by the database's clock, oldest first; relies on
-- akadze_schedule_runs_created_idx, then primary key lookups. Since grace is shorter than
-- retention, no run that still keeps a due fire time from firing twice is old enough to go.
-- Same lock as prune_jobs ({prune_lock}: transaction-scoped, try-only) and SKIP LOCKED. Returns
-- whether the lock was taken and how many rows went ({prune_reply}).
WITH {prune_lock},
doomed AS (
    SELECT r.schedule, r.fire_at FROM akadze_schedule_runs AS r
    WHERE r.created_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
        AND (SELECT pruner.locked FROM pruner)
    ORDER BY r.created_at LIMIT :limit FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM akadze_schedule_runs AS r USING doomed
    WHERE r.schedule = doomed.schedule AND r.fire_at = doomed.fire_at
    RETURNING 1
)
{prune_reply}
