-- job_trend_totals: the trends' table: per queue and task, from :since to :until, the jobs
-- finished per final state (bucket NULL) and the summed run-time histogram (state NULL, one row
-- per bucket). Hour rows up to the rollup's hours_until and minute rows after it with :hourly;
-- else minute rows (as job_trend). Reads ranges of akadze_job_stats's primary key.
WITH mark AS (
    SELECT coalesce(
        (SELECT m.hours_until FROM akadze_job_stats_mark AS m WHERE m.id = 1),
        CAST(:since AS timestamptz)
    ) AS hours_until
),
picked AS (
    SELECT s.queue, s.task, s.state, s.jobs, s.run_buckets, s.run_counts
    FROM akadze_job_stats AS s
    CROSS JOIN mark
    WHERE (
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
SELECT p.queue, p.task, p.state, sum(p.jobs) AS n, CAST(NULL AS smallint) AS bucket
FROM picked AS p
GROUP BY p.queue, p.task, p.state
UNION ALL
SELECT p.queue, p.task, NULL, sum(h.n), h.bucket
FROM picked AS p
CROSS JOIN LATERAL unnest(p.run_buckets, p.run_counts) AS h(bucket, n)
GROUP BY p.queue, p.task, h.bucket
