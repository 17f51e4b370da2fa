-- enqueue_now: enqueue for a job that is ready at once (no delay, no run_at), the common case.
-- The NOTIFY needs no condition here, and a statement without one plans and runs faster
-- (measured: about 1.25x the conditional form on one connection). One round trip.
-- :trace_context and :trace_parent are NULL unless tracing is on (akadze.events.tracing).
WITH job AS (
    INSERT INTO akadze_jobs ({new_job_columns})
    VALUES (
        {new_job_values}
    )
    RETURNING id, queue, run_at, created_at
)
SELECT job.id, job.run_at, job.created_at, pg_notify('akadze_jobs', job.queue) IS NULL AS notified
FROM job
