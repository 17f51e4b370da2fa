-- limit_holders: who holds the limit group of job :id now (issue 14's Limit; `akadze jobs
-- explain`): the jobs running in its concurrency group, and the starts of its rate window not
-- yet past (:per_s), with the time each frees its place. The group is the task and, for a
-- keyed limit, the job's :key argument, as claim_limited.sql builds it. Reads only: a
-- primary-key lookup, akadze_jobs_limit_idx and the group's row.
WITH g AS (
    SELECT
        CAST(jsonb_build_array(j.task, CASE WHEN CAST(:key AS text) IS NOT NULL THEN j.args -> CAST(:key AS text) END) AS text)
            AS grp
    FROM akadze_jobs AS j
    WHERE j.id = :id
)
SELECT
    'c' AS kind,
    r.id AS job_id,
    CAST(NULL AS timestamptz) AS free_at
FROM g
JOIN akadze_jobs AS r ON r.limit_grp = g.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
UNION ALL
SELECT
    'r' AS kind,
    s.id AS job_id,
    s.at + make_interval(secs => CAST(:per_s AS double precision)) AS free_at
FROM g
JOIN akadze_limit_groups AS l ON l.grp = g.grp
CROSS JOIN LATERAL unnest(l.starts, l.started) AS s(at, id)
WHERE s.at + make_interval(secs => CAST(:per_s AS double precision)) > now()
ORDER BY 1, 2
