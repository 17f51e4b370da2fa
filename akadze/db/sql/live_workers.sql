-- live_workers: every live worker (heartbeat within its own lost_after_s, database clock)
-- with its queues, slots, start, last heartbeat and age, and the jobs it runs (count, and the
-- first :max_ids ids), from akadze_jobs_running_idx. Reads only, takes no lock.
SELECT
    w.id,
    w.name,
    w.host,
    w.pid,
    w.queues,
    w.slots,
    w.started_at,
    w.heartbeat_at,
    extract(epoch FROM now() - w.heartbeat_at) AS heartbeat_age_s,
    r.running,
    r.running_ids
FROM akadze_workers AS w
CROSS JOIN LATERAL (
    SELECT
        count(*) AS running,
        coalesce((array_agg(j.id ORDER BY j.id))[1:CAST(:max_ids AS integer)], '{}') AS running_ids
    FROM akadze_jobs AS j
    WHERE j.worker_id = w.id
        AND j.state = 'running'
) AS r
WHERE w.heartbeat_at + make_interval(secs => w.lost_after_s) >= now()
ORDER BY w.name, w.id
