-- start_job_stats_mark: makes the trends' mark when it is missing (a fresh schema, or a test
-- suite that truncated it): the rollup starts after the newest minute and hour it already wrote,
-- else at the minute of the oldest finished job still kept (akadze_jobs_prune_idx, one entry),
-- else now. An existing mark is kept. Runs under the rollup's lock, in its transaction.
INSERT INTO akadze_job_stats_mark (id, minutes_until, hours_until)
SELECT 1, start.minute, coalesce(
    (SELECT max(s.at) + interval '1 hour' FROM akadze_job_stats AS s WHERE s.minutes = 60),
    date_trunc('hour', start.minute)
)
FROM (
    SELECT coalesce(
        (SELECT max(s.at) + interval '1 minute' FROM akadze_job_stats AS s WHERE s.minutes = 1),
        (
            SELECT date_trunc('minute', min(j.finished_at))
            FROM akadze_jobs AS j
            WHERE j.state IN ('succeeded', 'failed', 'cancelled')
        ),
        date_trunc('minute', now())
    ) AS minute
) AS start
ON CONFLICT (id) DO NOTHING
