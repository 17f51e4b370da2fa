-- enqueue_unique: inserts one job of a task with Unique, or returns the job that holds its key.
-- The key is :unique_key plus, with a period, the number of the window the database's clock is
-- in; akadze_jobs_unique_idx keeps one job per key among jobs in their blocking states, so
-- racing producers make one job. ON CONFLICT waits for a conflicting insert of another open
-- transaction: its commit makes this a duplicate, its rollback lets this insert. A conflicting
-- job committed after this statement's snapshot is invisible to the second branch: then no row
-- comes back and the caller runs the statement again. The new job's arguments are not sent back.
WITH k AS (
    SELECT CAST(:unique_key AS text) || COALESCE(
        ':' || CAST(CAST(floor(CAST(extract(epoch FROM now()) AS double precision) / CAST(:period_s AS double precision)) AS bigint) AS text),
        ''
    ) AS key
),
job AS (
    INSERT INTO akadze_jobs (
        task, queue, priority, args, args_fp, max_attempts, run_at, expires_at, trace_context, unique_key, unique_states
    )
    SELECT
        :task,
        :queue,
        :priority,
        CAST(:args AS jsonb),
        :args_fp,
        :max_attempts,
        COALESCE(CAST(:run_at AS timestamptz), now() + make_interval(secs => CAST(:delay_s AS double precision))),
        CAST(:expires_at AS timestamptz),
        :trace_context,
        k.key,
        CAST(:unique_states AS text[])
    FROM k
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING id, queue, run_at, created_at
)
SELECT
    false AS duplicate,
    job.id,
    NULL AS task,
    NULL AS queue,
    NULL AS state,
    NULL AS priority,
    NULL AS args,
    NULL AS attempt,
    NULL AS max_attempts,
    NULL AS run,
    job.run_at,
    NULL AS expires_at,
    NULL AS cancel_requested,
    NULL AS errors,
    NULL AS result,
    NULL AS worker_id,
    NULL AS args_fp,
    job.created_at,
    NULL AS started_at,
    NULL AS finished_at,
    NULL AS trace_context,
    (SELECT pg_notify('akadze_jobs', job.queue) WHERE job.run_at <= now()) AS notified
FROM job
UNION ALL
SELECT
    true,
    e.id,
    e.task,
    e.queue,
    e.state,
    e.priority,
    CAST(e.args AS text),
    e.attempt,
    e.max_attempts,
    e.run,
    e.run_at,
    e.expires_at,
    e.cancel_requested,
    CAST(e.errors AS text),
    CAST(e.result AS text),
    e.worker_id,
    e.args_fp,
    e.created_at,
    e.started_at,
    e.finished_at,
    e.trace_context,
    NULL
FROM akadze_jobs AS e, k
WHERE e.unique_key = k.key
    AND e.unique_key IS NOT NULL
    AND e.state = ANY (e.unique_states)
    AND NOT EXISTS (SELECT 1 FROM job)
