-- enqueue_batch: inserts many jobs of one task with the same options in one statement;
-- rows come back in input order (identity values follow the ordinality). One NOTIFY at most.
-- Only what the database decided comes back (id, run_at, created_at): not the arguments.
WITH job AS (
    INSERT INTO akadze_jobs (
        task, queue, priority, args, args_fp, max_attempts, run_at, expires_at, trace_context
    )
    SELECT
        :task,
        :queue,
        :priority,
        a.args,
        :args_fp,
        :max_attempts,
        COALESCE(CAST(:run_at AS timestamptz), now() + make_interval(secs => CAST(:delay_s AS double precision))),
        CAST(:expires_at AS timestamptz),
        :trace_context
    FROM unnest(CAST(:args AS jsonb[])) WITH ORDINALITY AS a(args, n)
    ORDER BY a.n
    RETURNING id, run_at, created_at
),
wake AS (
    SELECT pg_notify('akadze_jobs', :queue)
    WHERE COALESCE(CAST(:run_at AS timestamptz), now() + make_interval(secs => CAST(:delay_s AS double precision))) <= now()
)
SELECT job.id, job.run_at, job.created_at, (SELECT count(*) FROM wake) AS notified
FROM job
ORDER BY job.id
