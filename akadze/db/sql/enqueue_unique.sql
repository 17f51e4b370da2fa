-- enqueue_unique: inserts jobs of one task with Unique (one or many, in one statement), or
-- returns the jobs that hold their keys. Items carry distinct keys (the caller folds duplicates
-- inside a batch first); each comes back once, as its new job or as the job that holds its key,
-- with its position :n. A key is the item's unique key plus, with a period, the number of the
-- window the database's clock is in; akadze_jobs_unique_idx keeps one job per key among jobs in
-- their blocking states, so racing producers make one job. ON CONFLICT waits for a conflicting
-- insert of another open transaction: its commit makes this a duplicate, its rollback lets this
-- insert. An item whose conflicting job was committed after this statement's snapshot is
-- invisible to the second branch and comes back with no row: the caller sends it again. The
-- new jobs' arguments are not sent back. One NOTIFY at most.
WITH k AS (
    SELECT {unique_window} AS suffix
),
item AS (
    SELECT a.args, a.key || k.suffix AS key, a.n
    FROM unnest(CAST(:args AS jsonb[]), CAST(:unique_keys AS text[])) WITH ORDINALITY AS a(args, key, n), k
),
job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns}, run_at, unique_key, unique_states
    )
    SELECT
        {unique_job_values},
        {due_at},
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
