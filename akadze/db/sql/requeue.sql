-- requeue: a failed or cancelled job goes back to queued, now; attempt, errors and args are
-- kept, and max_attempts grows when the budget is spent, so the job gets at least one more run.
-- A cancelled job's cancel request is dropped, and so is an expiry already past (a requeued
-- job runs); a job its Limit had parked goes back to the claim index (a limited claim parks it
-- again while its group is full). A workflow step cancelled while it waited for its parents
-- (parked 'deps') is left as it is: no parent would release it again.
-- A job with a unique key that a newer job in its blocking states holds is left as it is: the
-- row comes back with held_by, the holder's id (a holder committed after this statement's
-- snapshot makes the UPDATE fail on akadze_jobs_unique_idx instead; nothing changes either way).
-- The row is locked first, so two requeues of one job cannot both apply, and the previous state
-- comes back with it for on_transition hooks. The JSON columns come back as text ({job_row},
-- db/sql.py), decoded by the caller per row.
WITH old AS (
    SELECT id, state, unique_key
    FROM akadze_jobs
    WHERE id = :id
        AND (state = 'failed' OR (state = 'cancelled' AND parked IS DISTINCT FROM 'deps'))
    FOR UPDATE
),
holder AS (
    SELECT h.id AS held_by
    FROM old
    JOIN akadze_jobs AS h
        ON h.unique_key = old.unique_key
        AND h.state = ANY (h.unique_states)
        AND h.id <> old.id
    LIMIT 1
),
moved AS (
    UPDATE akadze_jobs AS j
    SET
        state = 'queued',
        run_at = now(),
        max_attempts = greatest(j.max_attempts, j.attempt + 1),
        cancel_requested = false,
        expires_at = CASE WHEN j.expires_at <= now() THEN NULL ELSE j.expires_at END,
        parked = NULL,
        finished_at = NULL,
        result = NULL
    FROM old
    WHERE j.id = old.id
        AND NOT EXISTS (SELECT 1 FROM holder)
    RETURNING j.*, old.state AS from_state
)
SELECT
    {job_row},
    from_state,
    CAST(NULL AS bigint) AS held_by
FROM moved
UNION ALL
SELECT
    {job_row},
    state,
    held_by
FROM akadze_jobs, holder
WHERE id = :id
