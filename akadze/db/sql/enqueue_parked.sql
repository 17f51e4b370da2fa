-- enqueue_parked: enqueue_now for a job of a task with a Limit (the producer knows it): the job
-- goes in parked (parked = 'limit', its group in limit_grp), out of the claim index, and its
-- group gets an arrival row (migration 0018) that commits with it and that the next limited
-- claim reads, so a backlog enqueued at once is never read job by job from the claim index
-- (docs/flow-control.md, "Parked at enqueue"). The group is the claim's: the task and, for a
-- keyed Limit (:limit_key), the argument's stored JSON (none or null: one group). It writes no
-- group row, so it never waits for a claim. One round trip.
WITH job AS (
    INSERT INTO akadze_jobs ({new_job_columns}, parked, limit_grp)
    VALUES (
        {new_job_values},
        'limit',
        {parked_group}
    )
    RETURNING id, queue, run_at, created_at, limit_grp
),
arrival AS (
    INSERT INTO akadze_limit_arrivals (queue, task, grp)
    SELECT job.queue, :task, job.limit_grp
    FROM job
)
SELECT job.id, job.run_at, job.created_at, pg_notify('akadze_jobs', job.queue) IS NULL AS notified
FROM job
