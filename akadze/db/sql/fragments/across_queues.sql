-- {across_queues}: the ready jobs of more than :many_queues queues, locked, as the CTEs many_level
-- and across_queues (their tids): one walk of akadze_jobs_claim_many_idx (priority DESC,
-- run_at, id; its predicate queue <> '' is stated only here) over every queue, passing over the
-- ready jobs of queues this worker does not serve; the queue test is a hashed set built once
-- (IS TRUE keeps the planner from turning it into a join that reads every ready job before
-- sorting them). With :many_queues queues or fewer it reads nothing. Part of {ready_jobs};
-- claim_completing_plain_many.sql runs it alone.
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
