-- enqueue_unique_batch: enqueue_unique for many jobs of one task in one statement. Items carry
-- distinct keys (the caller folds duplicates inside the batch first); each comes back once, as
-- its new job or as the job that holds its key, with its position :n. An item whose conflicting
-- job was committed after this statement's snapshot comes back with no row: the caller sends it
-- again. Relies on akadze_jobs_unique_idx. One NOTIFY at most.
WITH k AS (
    SELECT {unique_window} AS suffix
),
item AS (
    SELECT a.args, a.key || k.suffix AS key, a.n
    FROM unnest(CAST(:args AS jsonb[]), CAST(:unique_keys AS text[])) WITH ORDINALITY AS a(args, key, n), k
),
job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns}, run_at, expires_at, trace_context, trace_parent, unique_key, unique_states
    )
    SELECT
        :task,
        :queue,
        :priority,
        item.args,
        :args_fp,
        :max_attempts,
        {due_at},
        CAST(:expires_at AS timestamptz),
        :trace_context,
        CAST(:trace_parent AS bytea),
        item.key,
        CAST(:unique_states AS text[])
    FROM item
    ORDER BY item.n
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state = ANY (unique_states) DO NOTHING
    RETURNING id, run_at, created_at, unique_key
),
wake AS (
    SELECT pg_notify('akadze_jobs', :queue)
    WHERE EXISTS (SELECT 1 FROM job WHERE job.run_at <= now())
)
SELECT
    item.n,
    false AS duplicate,
    {unique_inserted_row},
    (SELECT count(*) FROM wake) AS notified
FROM item
JOIN job ON job.unique_key = item.key
UNION ALL
SELECT
    item.n,
    true,
    {unique_holder_row},
    NULL
FROM item
JOIN akadze_jobs AS e ON e.unique_key = item.key AND e.unique_key IS NOT NULL AND e.state = ANY (e.unique_states)
WHERE NOT EXISTS (SELECT 1 FROM job WHERE job.unique_key = item.key)
