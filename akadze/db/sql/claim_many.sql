-- claim_many: claim.sql for a worker that serves many queues (fetcher.choose_claim): up to
-- :limit ready jobs of the given queues, highest priority first, then run_at, then id, through
-- akadze_jobs_claim_many_idx (priority DESC, run_at, id), read in the index's own order, so
-- statistics cannot flip the plan; SKIP LOCKED, so claimers never wait.
-- claim.sql reads each queue's index range and locks up to :limit jobs in each before keeping
-- :limit of them: with a thousand queues that is a thousand probes per claim. Here one scan
-- over all queues locks the jobs it keeps and stops at :limit, whatever the number of queues.
-- The price: ready jobs of queues this worker does not serve (or paused), ahead of its own in
-- claim order, are read and passed over, one row each.
-- As in claim.sql, the priorities present are walked from the highest down (level: one probe
-- each, over the queued jobs of every queue) and each priority's jobs are read as the range
-- run_at <= now(), so delayed jobs are never read. The ranges come out in claim order.
-- The queue test is a hashed set of the served queues, built once per claim (IS TRUE keeps the
-- planner from turning it into a join, which would read every ready job before sorting them),
-- and the paused queues (akadze_queue_pauses) another: a paused queue's jobs are neither
-- locked nor claimed.
-- queue <> '' (true of every job) is the index's predicate: claim.sql never states it, so only
-- this statement can be planned on akadze_jobs_claim_many_idx.
-- A job cancelled or expired before it starts ends cancelled here without running; the run
-- counter grows at every claim and fences every later write of this run; the JSON columns come
-- back as text and the result is not sent (as in claim.sql).
WITH RECURSIVE level AS (
    (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority < level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM level
    WHERE level.priority IS NOT NULL
),
picked AS (
    SELECT r.tid
    FROM level
    CROSS JOIN LATERAL (
        SELECT j.ctid AS tid
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority = level.priority
            AND j.run_at <= now()
            AND (j.queue IN (SELECT unnest(CAST(:queues AS text[])))) IS TRUE
            AND j.queue NOT IN (SELECT paused.queue FROM akadze_queue_pauses AS paused)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT :limit
        FOR UPDATE SKIP LOCKED
    ) AS r
    LIMIT :limit
)
{claim_picked}
