-- enqueue_workflow: inserts a workflow, all its steps and all its edges in one statement, so
-- the round trips do not grow with the steps (docs/workflows.md). The steps travel as arrays,
-- one item per step in the same order (:args one JSON text per step); the edges as two arrays
-- of step names (:edge_parent[i] before :edge_child[i]), joined to the inserted rows by name.
-- A step with parents (:deps_left > 0) is parked 'deps': out of the claim indexes until its
-- last parent's completion releases it. One NOTIFY per queue that has a step ready now. The
-- workflow is new, so nothing here can meet another transaction's rows.
WITH wf AS (
    INSERT INTO akadze_workflows (name)
    VALUES (CAST(:name AS text))
    RETURNING id
),
job AS (
    INSERT INTO akadze_jobs (
        {new_job_columns},
        run_at,
        workflow_id,
        step,
        deps_left,
        after_failure,
        parked
    )
    SELECT
        s.task,
        s.queue,
        s.priority,
        CAST(s.args AS jsonb),
        s.args_fp,
        s.max_attempts,
        s.expires_at,
        CAST(:trace_context AS text),
        CAST(:trace_parent AS bytea),
        COALESCE(s.run_at, now() + make_interval(secs => s.delay_s)),
        (SELECT wf.id FROM wf),
        s.step,
        s.deps_left,
        s.after_failure,
        CASE WHEN s.deps_left > 0 THEN 'deps' END
    FROM unnest(
        CAST(:steps AS text[]),
        CAST(:tasks AS text[]),
        CAST(:queues AS text[]),
        CAST(:priorities AS integer[]),
        CAST(:args AS text[]),
        CAST(:args_fps AS text[]),
        CAST(:max_attempts AS integer[]),
        CAST(:run_ats AS timestamptz[]),
        CAST(:delays AS double precision[]),
        CAST(:expires_ats AS timestamptz[]),
        CAST(:deps_lefts AS integer[]),
        CAST(:after_failures AS text[])
    ) WITH ORDINALITY AS s(
        step, task, queue, priority, args, args_fp, max_attempts, run_at, delay_s, expires_at,
        deps_left, after_failure, n
    )
    ORDER BY s.n
    RETURNING id, step, queue, run_at, created_at, parked
),
edge AS (
    INSERT INTO akadze_job_deps (parent_id, child_id)
    SELECT p.id, c.id
    FROM unnest(CAST(:edge_parent AS text[]), CAST(:edge_child AS text[])) AS e(parent, child)
    JOIN job AS p ON p.step = e.parent
    JOIN job AS c ON c.step = e.child
),
wake AS (
    SELECT pg_notify('akadze_jobs', r.queue)
    FROM (SELECT DISTINCT job.queue FROM job WHERE job.parked IS NULL AND job.run_at <= now()) AS r
)
SELECT
    job.id,
    job.step,
    job.run_at,
    job.created_at,
    (SELECT wf.id FROM wf) AS workflow_id,
    (SELECT count(*) FROM wake) AS notified
FROM job
