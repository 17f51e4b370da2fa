-- get_workflow: a workflow's steps, whole, in id order; relies on akadze_jobs_workflow_open_idx
-- and akadze_jobs_workflow_done_idx (its unfinished and its finished steps: every state, each
-- half spelled as its index's predicate so that both are searched). A plain read.
SELECT
    {job_row}
FROM akadze_jobs
WHERE workflow_id = CAST(:workflow_id AS bigint)
    AND (state IN ('queued', 'running') OR state IN ('succeeded', 'failed', 'cancelled'))
ORDER BY id
