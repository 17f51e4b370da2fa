-- get_job: one job by id. The JSON columns come back as text, decoded by the caller: a row
-- that cannot be decoded (arguments nested too deep, written by another producer) is still shown.
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
WHERE id = :id
