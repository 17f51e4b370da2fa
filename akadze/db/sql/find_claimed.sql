-- find_claimed: the running jobs this worker claimed but does not know of, because a claim
-- committed and its reply was lost with the connection. :known are the jobs it runs or has an
-- outcome pending for. Relies on akadze_jobs_running_idx; reads only. Columns as claim's
-- ({claimed_job_row}, db/sql.py).
SELECT
    {claimed_job_row}
FROM akadze_jobs
WHERE worker_id = CAST(:worker_id AS uuid)
    AND state = 'running'
    AND NOT (id = ANY(CAST(:known AS bigint[])))
ORDER BY id
