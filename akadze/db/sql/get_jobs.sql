-- get_jobs: whole rows of the given jobs, in id order (for on_transition hooks after a write,
-- and get_job's one).
-- The JSON columns come back as text, decoded per row: one undecodable row must not fail a
-- rescue or a completion batch.
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
    CAST(result AS text) AS result,
    worker_id,
    args_fp,
    created_at,
    started_at,
    finished_at,
    trace_context
FROM akadze_jobs
WHERE id = ANY(CAST(:ids AS bigint[]))
ORDER BY id
