-- queue_stats: per queue: paused, ready, delayed, running, the oldest ready job's wait in
-- seconds (database clock) and the live workers serving it; with :full (`queues list`), also
-- the held jobs (queued but parked: a job its Limit holds, a workflow step waiting for its
-- parents) and the failed ones (NULL without). Ready and delayed count the claimable jobs, so a
-- parked job is neither. The queues listed are those in :queues (say, the app's), those with a
-- queued or running job, the paused ones, those a live worker serves and, with :full, those
-- with a held or failed job. Queued rows are read from akadze_jobs_claim_idx and running ones
-- from akadze_jobs_running_idx; without :full, no parked or finished row is visited (the kept
-- CTE's two reads sit behind a one-time filter that is false). With it, each parked row is
-- read once from akadze_jobs_parked_idx and each failed row once through
-- akadze_jobs_state_id_idx: a cost that grows with the jobs held and with the failed jobs
-- retention keeps, paid by `queues list`, not by the metrics' gauges or the dashboard.
-- Reads only, takes no lock.
WITH live AS (
    SELECT w.queues
    FROM akadze_workers AS w
    WHERE w.heartbeat_at + make_interval(secs => w.lost_after_s) >= now()
),
queued AS (
    SELECT
        j.queue,
        count(*) FILTER (WHERE j.run_at <= now()) AS ready,
        count(*) FILTER (WHERE j.run_at > now()) AS delayed,
        extract(epoch FROM now() - min(j.run_at) FILTER (WHERE j.run_at <= now())) AS oldest_ready_s
    FROM akadze_jobs AS j
    WHERE j.state = 'queued'
        AND j.parked IS NULL
    GROUP BY j.queue
),
-- the held and the failed jobs, each read from its own index (a branch each), counted per queue
kept AS (
    SELECT
        k.queue,
        count(*) FILTER (WHERE k.held) AS held,
        count(*) FILTER (WHERE NOT k.held) AS failed
    FROM (
        SELECT j.queue, true AS held
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.parked IS NOT NULL
        UNION ALL
        SELECT j.queue, false
        FROM akadze_jobs AS j
        WHERE j.state = 'failed'
    ) AS k
    WHERE CAST(:full AS boolean)
    GROUP BY k.queue
),
running AS (
    SELECT
        j.queue,
        count(*) AS running
    FROM akadze_jobs AS j
    WHERE j.state = 'running'
    GROUP BY j.queue
),
serving AS (
    SELECT
        q.name AS queue,
        count(*) AS workers
    FROM live
    CROSS JOIN LATERAL unnest(live.queues) AS q(name)
    GROUP BY q.name
),
names AS (
    SELECT n.name
    FROM unnest(CAST(:queues AS text[])) AS n(name)
    UNION
    SELECT queued.queue FROM queued
    UNION
    SELECT running.queue FROM running
    UNION
    SELECT p.queue FROM akadze_queue_pauses AS p
    UNION
    SELECT serving.queue FROM serving
    UNION
    SELECT kept.queue FROM kept
)
SELECT
    names.name,
    p.queue IS NOT NULL AS paused,
    coalesce(queued.ready, 0) AS ready,
    coalesce(queued.delayed, 0) AS delayed,
    coalesce(running.running, 0) AS running,
    CASE WHEN CAST(:full AS boolean) THEN coalesce(kept.held, 0) END AS held,
    CASE WHEN CAST(:full AS boolean) THEN coalesce(kept.failed, 0) END AS failed,
    queued.oldest_ready_s,
    coalesce(serving.workers, 0) AS workers
FROM names
LEFT JOIN akadze_queue_pauses AS p ON p.queue = names.name
LEFT JOIN queued ON queued.queue = names.name
LEFT JOIN running ON running.queue = names.name
LEFT JOIN serving ON serving.queue = names.name
LEFT JOIN kept ON kept.queue = names.name
ORDER BY names.name
