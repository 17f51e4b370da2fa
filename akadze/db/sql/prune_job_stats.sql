-- prune_job_stats: deletes the trends' minute rows older than :minute_keep_s seconds and their
-- hour rows older than :hour_keep_s seconds (two ranges of the primary key). Runs in the
-- rollup's transaction, under its lock. Returns the rows deleted.
WITH gone AS (
    DELETE FROM akadze_job_stats AS s
    WHERE (s.minutes = 1 AND s.at < now() - make_interval(secs => CAST(:minute_keep_s AS double precision)))
        OR (s.minutes = 60 AND s.at < now() - make_interval(secs => CAST(:hour_keep_s AS double precision)))
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone
