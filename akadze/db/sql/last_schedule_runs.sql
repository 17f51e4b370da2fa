-- last_schedule_runs: the database's clock and, for each named schedule, its newest recorded
-- fire time (NULL when it has none). One backward scan of the primary key
-- (schedule, fire_at) per schedule; reads only, takes no lock.
SELECT
    now() AS now,
    s.name AS schedule,
    r.fire_at
FROM unnest(CAST(:schedules AS text[])) AS s(name)
LEFT JOIN LATERAL (
    SELECT runs.fire_at
    FROM akadze_schedule_runs AS runs
    WHERE runs.schedule = s.name
    ORDER BY runs.fire_at DESC
    LIMIT 1
) AS r ON true
