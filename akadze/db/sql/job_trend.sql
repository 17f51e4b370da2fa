-- job_trend: the trends' figures from :since to :until, of the queue :queue and the task :task
-- (NULL: any): the jobs finished per final state (bucket NULL) and the summed run-time histogram
-- (state NULL, one row per bucket). With :by_slot, per slot of :slot_s seconds (slot 0 starts at
-- :since; queue and task NULL): the charts' series; else per queue and task (slot NULL): the
-- table. With :hourly, hour rows up to the rollup's hours_until and minute rows after it; else
-- minute rows. Reads ranges of akadze_job_stats's primary key; never akadze_jobs.
WITH mark AS (
    SELECT coalesce(
        (SELECT m.hours_until FROM akadze_job_stats_mark AS m WHERE m.id = 1),
        CAST(:since AS timestamptz)
    ) AS hours_until
),
picked AS (
    SELECT
        CASE WHEN CAST(:by_slot AS boolean) THEN CAST(floor(
            (date_part('epoch', s.at) - date_part('epoch', CAST(:since AS timestamptz)))
            / CAST(:slot_s AS double precision)
        ) AS integer) END AS slot,
        CASE WHEN NOT CAST(:by_slot AS boolean) THEN s.queue END AS queue,
        CASE WHEN NOT CAST(:by_slot AS boolean) THEN s.task END AS task,
        s.state,
        s.jobs,
        s.run_buckets,
        s.run_counts
    FROM akadze_job_stats AS s
    CROSS JOIN mark
    WHERE (
        (
            CAST(:hourly AS boolean)
            AND s.minutes = 60
            AND s.at >= CAST(:since AS timestamptz)
            AND s.at < least(mark.hours_until, CAST(:until AS timestamptz))
        )
        OR (
            s.minutes = 1
            AND s.at >= CASE
                WHEN CAST(:hourly AS boolean) THEN greatest(CAST(:since AS timestamptz), mark.hours_until)
                ELSE CAST(:since AS timestamptz)
            END
            AND s.at < CAST(:until AS timestamptz)
        )
    )
        AND (CAST(:queue AS text) IS NULL OR s.queue = CAST(:queue AS text))
        AND (CAST(:task AS text) IS NULL OR s.task = CAST(:task AS text))
)
SELECT p.slot, p.queue, p.task, p.state, sum(p.jobs) AS n, CAST(NULL AS smallint) AS bucket
FROM picked AS p
GROUP BY p.slot, p.queue, p.task, p.state
UNION ALL
SELECT p.slot, p.queue, p.task, NULL, sum(h.n), h.bucket
FROM picked AS p
CROSS JOIN LATERAL unnest(p.run_buckets, p.run_counts) AS h(bucket, n)
GROUP BY p.slot, p.queue, p.task, h.bucket
