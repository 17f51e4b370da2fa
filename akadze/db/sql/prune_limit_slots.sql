-- prune_limit_slots: deletes up to :limit limit permits that are free and were last taken more
-- than :retention_s seconds ago (per-key limits leave a row per key and slot behind; a group
-- that runs again makes its rows anew). Free as the claim decides it: a rate permit past
-- free_at; a concurrency permit whose claim this snapshot sees and whose job no longer runs
-- with that run. Reads the table whole (no index: a pass a minute). Same lock as prune_jobs
-- (transaction-scoped, try-only) and SKIP LOCKED: a permit a claim is taking stays. Returns
-- whether the lock was taken and how many rows went.
WITH pruner AS (
    SELECT pg_try_advisory_xact_lock(CAST(:lock_key AS bigint)) AS locked
),
doomed AS (
    SELECT s.grp, s.slot
    FROM akadze_limit_slots AS s
    WHERE s.taken_at < now() - make_interval(secs => CAST(:retention_s AS double precision))
        AND (SELECT pruner.locked FROM pruner)
        AND CASE
            WHEN s.free_at IS NOT NULL THEN s.free_at <= now()
            ELSE pg_visible_in_snapshot(s.taken_by, pg_current_snapshot())
                AND NOT COALESCE((
                    SELECT r.run = s.run AND r.state = 'running' FROM akadze_jobs AS r WHERE r.id = s.job_id
                ), false)
        END
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
gone AS (
    DELETE FROM akadze_limit_slots AS s
    USING doomed
    WHERE s.grp = doomed.grp
        AND s.slot = doomed.slot
    RETURNING 1
)
SELECT
    (SELECT pruner.locked FROM pruner) AS locked,
    (SELECT count(*) FROM gone) AS deleted
