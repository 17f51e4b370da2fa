-- job_stats_mark: how far the trends' rollup has gone (NULLs before its first pass), and the
-- database's clock. Primary-key lookup; reads only.
SELECT
    now() AS now,
    (SELECT m.minutes_until FROM akadze_job_stats_mark AS m WHERE m.id = 1) AS minutes_until,
    (SELECT m.hours_until FROM akadze_job_stats_mark AS m WHERE m.id = 1) AS hours_until
