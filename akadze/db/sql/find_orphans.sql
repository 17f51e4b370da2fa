-- find_orphans: running jobs whose worker is gone; SKIP LOCKED, so a rescue never waits on a
-- row that a stalled run has locked. Relies on akadze_jobs_running_idx. Reads only what a
-- rescue needs: never the arguments or the result (a row it cannot decode must not stop it).
SELECT j.id, j.task, j.queue, j.attempt, j.max_attempts, j.run, j.worker_id
FROM akadze_jobs AS j
WHERE j.state = 'running'
    AND NOT EXISTS (SELECT 1 FROM akadze_workers AS w WHERE w.id = j.worker_id)
ORDER BY j.id
LIMIT :limit
FOR UPDATE OF j SKIP LOCKED
