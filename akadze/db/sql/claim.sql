-- claim: takes up to :limit ready jobs of the given queues, highest priority first, then
-- run_at, then id; relies on akadze_jobs_claim_idx (queue, priority DESC, run_at, id), read in
-- the index's own order, so statistics cannot flip the plan; SKIP LOCKED, so claimers never wait.
-- Per queue, the priorities present are walked from the highest down, one index probe each
-- (level: a loose index scan), and each priority's jobs are read as the range run_at <= now():
-- the scan stops at the first delayed job of a priority, so delayed jobs are never read,
-- whatever their priority. The ranges come out in claim order and the scan stops at :limit.
-- An idle claim costs a few probes per priority present in the queue.
-- A job cancelled or expired before it starts ends cancelled here without running.
-- The run counter grows at every claim and fences every later write of this run.
-- The JSON columns come back as text, decoded per job by the worker: a row that cannot be
-- decoded (too deep, not an object) fails alone instead of the whole claim's reply. The result
-- is not sent: a job about to run has none it needs.
-- A paused queue (akadze_queue_pauses) is skipped before its index is read: none of its rows
-- is locked or claimed, and the check costs one primary-key probe per queue.
WITH picked AS (
    SELECT p.tid
    FROM unnest(CAST(:queues AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE level AS (
            (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                ORDER BY j.priority DESC
                LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                    AND j.priority < level.priority
                ORDER BY j.priority DESC
                LIMIT 1
            )
            FROM level
            WHERE level.priority IS NOT NULL
        )
        SELECT r.id, r.tid, r.priority, r.run_at
        FROM level
        CROSS JOIN LATERAL (
            SELECT j.id, j.ctid AS tid, j.priority, j.run_at
            FROM akadze_jobs AS j
            WHERE j.state = 'queued'
                AND j.queue = q.name
                AND j.priority = level.priority
                AND j.run_at <= now()
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT :limit
            FOR UPDATE SKIP LOCKED
        ) AS r
        WHERE NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        LIMIT :limit
    ) AS p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT :limit
)
{claim_picked}
