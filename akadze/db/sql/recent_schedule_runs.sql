-- recent_schedule_runs: the newest :per_schedule recorded fire times of each named schedule,
-- newest first, with the job each enqueued and that job's state now (NULL once pruned). One
-- backward scan of the primary key (schedule, fire_at) per schedule; reads only.
SELECT
    s.name AS schedule,
    r.fire_at,
    r.job_id,
    j.state
FROM unnest(CAST(:schedules AS text[])) AS s(name)
CROSS JOIN LATERAL (
    SELECT
        runs.fire_at,
        runs.job_id
    FROM akadze_schedule_runs AS runs
    WHERE runs.schedule = s.name
    ORDER BY runs.fire_at DESC
    LIMIT :per_schedule
) AS r
LEFT JOIN akadze_jobs AS j ON j.id = r.job_id
ORDER BY s.name, r.fire_at DESC
