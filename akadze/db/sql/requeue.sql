-- requeue: a failed job goes back to queued, now; attempt, errors and args are kept, and
-- max_attempts grows when the budget is spent, so the job gets at least one more run.
UPDATE akadze_jobs
SET
    state = 'queued',
    run_at = now(),
    max_attempts = greatest(max_attempts, attempt + 1),
    cancel_requested = false,
    finished_at = NULL,
    result = NULL
WHERE id = :id
    AND state = 'failed'
RETURNING *, 'failed' AS from_state
