-- get_workflow: a workflow's steps, whole, in id order; relies on akadze_jobs_workflow_idx
-- (workflow_id, step). A plain read.
SELECT
    {job_row}
FROM akadze_jobs
WHERE workflow_id = CAST(:workflow_id AS bigint)
ORDER BY id
