-- repark_steps: after a requeue, the steps its failure had cancelled wait again for their
-- parents (state queued, parked 'deps', :counts[i] parents to wait for, their cancel request
-- and a passed expiry dropped), and the steps still waiting that counted a requeued step as
-- finished (after_failure 'run') wait for it again (:counts[i] added). The rows were locked by
-- step_dependents.sql in the same transaction. Returns the re-parked rows ({job_row}) and
-- whether each was added to (the JSON columns as text).
WITH moved AS (
    UPDATE akadze_jobs AS j
    SET
        state = 'queued',
        parked = 'deps',
        deps_left = CASE WHEN r.added THEN j.deps_left + r.n ELSE r.n END,
        finished_at = CASE WHEN r.added THEN j.finished_at END,
        cancel_requested = r.added AND j.cancel_requested,
        expires_at = CASE WHEN j.expires_at <= now() THEN NULL ELSE j.expires_at END,
        run_at = CASE WHEN r.added THEN j.run_at ELSE now() END
    FROM unnest(
        CAST(:ids AS bigint[]), CAST(:counts AS integer[]), CAST(:added AS boolean[])
    ) AS r(id, n, added)
    WHERE j.id = r.id
    RETURNING j.*, r.added
)
SELECT {job_row}, added
FROM moved
ORDER BY id
