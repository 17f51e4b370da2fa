-- enqueue_unique: inserts one job of a task with Unique, or returns the job that holds its key.
-- The key is :unique_key plus, with a period, the number of the window the database's clock is
-- in; akadze_jobs_unique_idx keeps one job per key among jobs in their blocking states, so
-- racing producers make one job. ON CONFLICT waits for a conflicting insert of another open
-- transaction: its commit makes this a duplicate, its rollback lets this insert. A conflicting
-- job committed after this statement's snapshot is invisible to the second branch: then no row
-- comes back and the caller runs the statement again. The new job's arguments are not sent back.
WITH k AS (
    SELECT CAST(:unique_key AS text) || {unique_window} AS key
),
job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns}, run_at, expires_at, trace_context, trace_parent, unique_key, unique_states
    )
    SELECT
        {new_job_values},
        {due_at},
        CAST(:expires_at AS timestamptz),
        :trace_context,
        CAST(:trace_parent AS bytea),
        k.key,
        CAST(:unique_states AS text[])
    FROM k
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING id, queue, run_at, created_at
)
SELECT
    false AS duplicate,
    {unique_inserted_row},
    (SELECT pg_notify('akadze_jobs', job.queue) WHERE job.run_at <= now()) AS notified
FROM job
UNION ALL
SELECT
    true,
    {unique_holder_row},
    NULL
FROM akadze_jobs AS e, k
WHERE e.unique_key = k.key
    AND e.unique_key IS NOT NULL
    AND e.state = ANY (e.unique_states)
    AND NOT EXISTS (SELECT 1 FROM job)
