-- find_claimed: the running jobs this worker claimed but does not know of, because a claim
-- committed and its reply was lost with the connection. :known are the jobs it runs or has an
-- outcome pending for. Relies on akadze_jobs_running_idx; reads only. Columns as claim's.
SELECT
    id,
    task,
    queue,
    state,
    priority,
    CAST(args AS text) AS args,
    attempt,
    max_attempts,
    run,
    run_at,
    expires_at,
    cancel_requested,
    CAST(errors AS text) AS errors,
    NULL AS result,
    worker_id,
    args_fp,
    created_at,
    started_at,
    finished_at,
    trace_context
FROM akadze_jobs
WHERE worker_id = CAST(:worker_id AS uuid)
    AND state = 'running'
    AND NOT (id = ANY(CAST(:known AS bigint[])))
ORDER BY id
