-- find_written: of the runs (:ids, :runs) whose outcomes a write sent and whose reply was
-- lost, those that write ended: the job still has the run's number and is no longer running,
-- and the worker :worker_id has been registered since before the run started. Only its own
-- outcome or a rescue ends a running job without a new run, and a rescue follows the
-- worker's deletion, after which it registers again (a later started_at). Returns the jobs
-- as complete_batch does. Reads only, by primary key.
SELECT j.id, j.task, j.queue, j.state, j.attempt, j.run, j.run_at
FROM unnest(CAST(:ids AS bigint[]), CAST(:runs AS integer[])) AS c(id, run)
JOIN akadze_jobs AS j
    ON j.id = c.id
WHERE j.run = c.run
    AND j.state <> 'running'
    AND EXISTS (
        SELECT 1
        FROM akadze_workers AS w
        WHERE w.id = CAST(:worker_id AS uuid)
            AND w.started_at <= j.started_at
    )
ORDER BY j.id
