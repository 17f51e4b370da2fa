-- {queue_levels}: the priorities present among queue q.name's claimable jobs, highest first,
-- one index probe each (a recursive CTE named level; a NULL priority ends it); none for a
-- paused queue (akadze_queue_pauses), whose rows are then never read. The claims
-- (claim_completing.sql, claim_limited.sql) then read each level's ready jobs, so delayed jobs
-- above the ready ones are never read.
level AS (
    (
        {claimable_priority}
            AND j.queue = q.name
            AND NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        {claimable_priority}
            AND j.queue = q.name
            AND j.priority < level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM level
    WHERE level.priority IS NOT NULL
)
