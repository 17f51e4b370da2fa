-- {ready_jobs}: the ready jobs a claim takes (claim_completing.sql, claim_completing_plain.sql), locked,
-- as the CTEs per_queue and across_queues (their tids; the claim's UPDATE reads them). Up to
-- :limit jobs of :queues, highest priority first, then run_at, then id, reading a claim index
-- in its own order, so statistics cannot flip the plan; SKIP LOCKED, so claimers never wait. Up
-- to :many_queues queues (MANY_QUEUES, 8), one queue at a time through akadze_jobs_claim_idx
-- (queue, priority DESC, run_at, id): per queue the priorities present are walked from the
-- highest down (one index probe each: a loose index scan, {queue_levels}) and each priority's
-- jobs are read as the range run_at <= now(), so delayed jobs are never read, whatever their
-- priority. Past them (a thousand queues would be a thousand probes), one walk of
-- akadze_jobs_claim_many_idx (priority DESC, run_at, id; its predicate queue <> '' is stated
-- only here) over every queue, passing over the ready jobs of queues this worker does not
-- serve; the queue test is a hashed set built once (IS TRUE keeps the planner from turning it
-- into a join that reads every ready job before sorting them). The branch not taken is cut by
-- its constant condition before it reads anything. A paused queue (akadze_queue_pauses) is
-- skipped before its rows are read.
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
),
-- past :many_queues queues: the priorities present over every queue (none walked up to it)
many_level AS (
    (
        {claimable_priority}
            AND j.queue <> ''
            AND cardinality(CAST(:queues AS text[])) > CAST(:many_queues AS integer)
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        {claimable_priority}
            AND j.queue <> ''
            AND j.priority < many_level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM many_level
    WHERE many_level.priority IS NOT NULL
),
across_queues AS (
    SELECT r.tid
    FROM many_level
    CROSS JOIN LATERAL (
        SELECT j.ctid AS tid
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.parked IS NULL
            AND j.queue <> ''
            AND j.priority = many_level.priority
            AND j.run_at <= now()
            AND (j.queue IN (SELECT unnest(CAST(:queues AS text[])))) IS TRUE
            AND j.queue NOT IN (SELECT paused.queue FROM akadze_queue_pauses AS paused)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT CAST(:limit AS bigint)
        FOR UPDATE SKIP LOCKED
    ) AS r
    LIMIT CAST(:limit AS bigint)
)
