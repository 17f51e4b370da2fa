-- enqueue_parked_batch: enqueue_batch for jobs due now of a task with a Limit (enqueue_parked.sql
-- says why): every job parked in its group, one arrival row per group of the batch. The ids
-- come back as one array in input order. One NOTIFY.
WITH job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns}, parked, limit_grp
    )
    SELECT
        {batch_job_values},
        'limit',
        {batch_parked_group}
    FROM jsonb_array_elements(CAST(:args AS jsonb)) WITH ORDINALITY AS a(args, n)
    ORDER BY a.n
    RETURNING id, limit_grp
),
arrival AS (
    INSERT INTO akadze_limit_arrivals (queue, task, grp)
    SELECT DISTINCT :queue, :task, job.limit_grp
    FROM job
)
SELECT
    array_agg(job.id ORDER BY job.id) AS ids,
    now() AS run_at,
    now() AS created_at,
    pg_notify('akadze_jobs', :queue) IS NULL AS notified
FROM job
