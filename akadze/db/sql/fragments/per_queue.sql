-- {per_queue}: the ready jobs of up to :many_queues queues (MANY_QUEUES, 8), locked, as the CTE
-- per_queue (their tids), one queue at a time through akadze_jobs_claim_idx (queue, priority
-- DESC, run_at, id): per queue the priorities present are walked from the highest down (one
-- index probe each: a loose index scan, {queue_levels}) and each priority's jobs are read as the
-- range run_at <= now(), so delayed jobs are never read, whatever their priority. With more
-- queues it reads nothing. Part of {ready_jobs}; claim_completing_plain.sql runs it alone.
-- up to :many_queues queues: one queue at a time (with more, unnest(NULL) gives none)
per_queue AS (
    SELECT p.tid
    FROM unnest(
        CASE WHEN cardinality(CAST(:queues AS text[])) <= CAST(:many_queues AS integer) THEN CAST(:queues AS text[]) END
    ) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE {queue_levels}
        SELECT r.id, r.tid, r.priority, r.run_at
        FROM level
        CROSS JOIN LATERAL (
            SELECT j.id, j.ctid AS tid, j.priority, j.run_at
            {level_ready}
            LIMIT CAST(:limit AS bigint)
        ) AS r
        LIMIT CAST(:limit AS bigint)
    ) AS p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT CAST(:limit AS bigint)
)
