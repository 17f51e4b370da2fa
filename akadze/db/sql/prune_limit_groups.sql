-- prune_limit_groups: deletes up to :limit limit group rows last written more than
-- :retention_s seconds ago whose group has no running and no parked job (per-key limits leave a row per key
-- behind; a group that runs again makes its row anew, counting its runs). Reads the table
-- whole (no index: a pass a minute), and akadze_jobs_limit_idx per row. Same lock as prune_jobs
-- (transaction-scoped, try-only) and SKIP LOCKED: a row a claim is writing stays; the DELETE
-- checks the age again on the row's latest version, so a row just taken stays too. Returns
-- whether the lock was taken and how many rows went.
WITH pruner AS (
    SELECT pg_try_advisory_xact_lock(CAST(:lock_key AS bigint)) AS locked
),
doomed AS (
    SELECT g.grp
    FROM akadze_limit_groups AS g
    WHERE g.taken_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
        AND (SELECT pruner.locked FROM pruner)
        AND NOT EXISTS (SELECT 1 FROM akadze_jobs AS r WHERE r.limit_grp = g.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled'))
        -- a group with parked jobs keeps its row: its due_at is how claims find them
        AND g.due_at IS NULL
        AND {first_parked} IS NULL
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM akadze_limit_groups AS g
    USING doomed
    WHERE g.grp = doomed.grp
        AND g.taken_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
    RETURNING 1
)
SELECT
    (SELECT pruner.locked FROM pruner) AS locked,
    (SELECT count(*) FROM gone) AS deleted
