-- enqueue: inserts one job; a job that is ready now wakes listening workers at commit
-- (a job ready at once without delay or run_at goes through enqueue_now instead).
-- Runs in the caller's transaction when there is one. One round trip. Only what the database
-- decided comes back (id, run_at, created_at): not the arguments.
WITH job AS (
    INSERT INTO akadze_jobs ({new_job_columns}, run_at)
    VALUES (
        {new_job_values},
        {due_at}
    )
    RETURNING id, queue, run_at, created_at
)
SELECT job.id, job.run_at, job.created_at,
    (SELECT pg_notify('akadze_jobs', job.queue) WHERE job.run_at <= now()) AS notified
FROM job
