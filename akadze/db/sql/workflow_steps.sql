-- workflow_steps: a workflow as operators see it (`akadze workflows show`, the dashboard's
-- /workflows/{id}): its row, then one row per step (id order: parents first) with the step's
-- state, whether it still waits for its parents, its last error's type, and the ids of the
-- steps it waits for. Never arguments or results. Relies on the workflows' primary key,
-- akadze_jobs_workflow_open_idx and akadze_jobs_workflow_done_idx (the steps, unfinished and
-- finished: every state, each half spelled as its index's predicate) and
-- akadze_job_deps_child_idx (each step's parents).
-- Reads only, takes no lock: on a replica it shows the graph as of the replica's last replay.
-- No row: no such workflow; one row whose id is NULL: a workflow with no step left.
SELECT
    w.id AS workflow_id,
    w.name,
    w.created_at AS workflow_created_at,
    j.id,
    j.step,
    j.task,
    j.queue,
    j.state,
    j.state = 'queued' AND j.parked = 'deps' AS waiting,
    j.deps_left,
    j.after_failure,
    j.attempt,
    j.max_attempts,
    j.cancel_requested,
    j.run_at,
    j.started_at,
    j.finished_at,
    j.errors -> -1 ->> 'type' AS error_type,
    ARRAY(
        SELECT d.parent_id
        FROM akadze_job_deps AS d
        WHERE d.child_id = j.id
        ORDER BY d.parent_id
    ) AS parents
FROM akadze_workflows AS w
LEFT JOIN akadze_jobs AS j
    -- the parameter, not w.id: the index is searched for this workflow's steps alone
    ON j.workflow_id = CAST(:workflow_id AS bigint)
        AND (j.state IN ('queued', 'running') OR j.state IN ('succeeded', 'failed', 'cancelled'))
WHERE w.id = CAST(:workflow_id AS bigint)
ORDER BY j.id
