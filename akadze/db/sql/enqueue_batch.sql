-- enqueue_batch: inserts many jobs of one task with the same options in one statement.
-- :args is one JSON array, an element per job; the ids come back as one array in input order
-- (identity values follow the ordinality), with the run_at and created_at every row shares:
-- one transaction, one now(), so they are the column's default and the due time computed once
-- here, not read back from each row. One NOTIFY at most. Not the arguments.
WITH job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns}, run_at
    )
    SELECT
        {batch_job_values},
        {due_at}
    FROM jsonb_array_elements(CAST(:args AS jsonb)) WITH ORDINALITY AS a(args, n)
    ORDER BY a.n
    RETURNING id
),
wake AS (
    SELECT pg_notify('akadze_jobs', :queue)
    WHERE {due_at} <= now()
)
SELECT
    array_agg(job.id ORDER BY job.id) AS ids,
    {due_at} AS run_at,
    now() AS created_at,
    (SELECT count(*) FROM wake) AS notified
FROM job
