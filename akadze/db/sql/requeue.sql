-- requeue: a failed job goes back to queued, now; attempt, errors and args are kept, and
-- max_attempts grows when the budget is spent, so the job gets at least one more run.
-- A job with a unique key that a newer job in its blocking states holds is left as it is: the
-- row comes back with held_by, the holder's id (a holder committed after this statement's
-- snapshot makes the UPDATE fail on akadze_jobs_unique_idx instead; nothing changes either way).
-- The JSON columns come back as text ({job_row}, db/sql.py), decoded by the caller per row.
WITH holder AS (
    SELECT h.id AS held_by
    FROM akadze_jobs AS f
    JOIN akadze_jobs AS h
        ON h.unique_key = f.unique_key
        AND h.unique_key IS NOT NULL
        AND h.state = ANY (h.unique_states)
        AND h.id <> f.id
    WHERE f.id = :id
        AND f.state = 'failed'
    LIMIT 1
),
moved AS (
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
        AND NOT EXISTS (SELECT 1 FROM holder)
    RETURNING *
)
SELECT
    {job_row},
    'failed' AS from_state,
    CAST(NULL AS bigint) AS held_by
FROM moved
UNION ALL
SELECT
    {job_row},
    'failed',
    held_by
FROM akadze_jobs, holder
WHERE id = :id
