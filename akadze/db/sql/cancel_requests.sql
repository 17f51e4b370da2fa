-- cancel_requests: which running jobs of this worker have a cancel request (for
-- current().cancel_requested); one statement per heartbeat interval for all of them.
-- Relies on akadze_jobs_running_idx (worker_id WHERE state = 'running').
SELECT id
FROM akadze_jobs
WHERE worker_id = CAST(:worker_id AS uuid)
    AND state = 'running'
    AND cancel_requested
