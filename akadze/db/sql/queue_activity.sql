-- queue_activity: per queue, the jobs that failed in the last hour (akadze_jobs_failed_idx,
-- failed rows only) and the jobs finished in each of the last :minutes minutes, 0 being the
-- current one (akadze_jobs_prune_idx, a range of finished_at). One row per (queue, minute)
-- with finished jobs, and one per queue with failures (minute NULL). Reads only.
SELECT
    j.queue,
    NULL AS minute,
    count(*) AS jobs
FROM akadze_jobs AS j
WHERE j.state = 'failed'
    AND j.finished_at > now() - interval '1 hour'
GROUP BY j.queue
UNION ALL
SELECT
    j.queue,
    CAST(floor(extract(epoch FROM now() - j.finished_at) / 60) AS integer) AS minute,
    count(*) AS jobs
FROM akadze_jobs AS j
WHERE j.state IN ('succeeded', 'failed', 'cancelled')
    AND j.finished_at > now() - make_interval(mins => CAST(:minutes AS integer))
GROUP BY 1, 2
