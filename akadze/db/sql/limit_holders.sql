-- limit_holders: who holds the limit groups of job :id now (issue 14's Limit; `akadze jobs
-- explain`): the jobs holding a concurrency permit of its group (running with the permit's run)
-- and the rate permits of its group not yet free, with their free_at. The group is the task
-- and, for a keyed limit, the job's :key argument, as claim_limited.sql builds it. Reads only:
-- a primary-key lookup and the permits of two groups (akadze_limit_slots' primary key).
WITH g AS (
    SELECT
        CAST(jsonb_build_array(j.task, CASE WHEN CAST(:key AS text) IS NOT NULL THEN j.args -> CAST(:key AS text) END) AS text)
            AS gkey
    FROM akadze_jobs AS j
    WHERE j.id = :id
)
SELECT
    'c' AS kind,
    s.job_id,
    CAST(NULL AS timestamptz) AS free_at
FROM g
JOIN akadze_limit_slots AS s ON s.grp = 'c' || g.gkey
WHERE s.slot < coalesce(CAST(:concurrency AS integer), 2147483647)
    AND EXISTS (
        SELECT 1 FROM akadze_jobs AS r WHERE r.id = s.job_id AND r.run = s.run AND r.state = 'running'
    )
UNION ALL
SELECT
    'r' AS kind,
    s.job_id,
    s.free_at
FROM g
JOIN akadze_limit_slots AS s ON s.grp = 'r' || g.gkey
WHERE s.slot < coalesce(CAST(:rate AS integer), 2147483647)
    AND s.free_at > now()
ORDER BY 1, 2
