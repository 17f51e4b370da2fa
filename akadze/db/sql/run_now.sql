-- run_now: a queued job that waits for its run_at (delayed, retried or snoozed) becomes ready
-- now, and its queue's workers are woken. Any other job changes nothing (no row returned).
-- Attempt, errors and args are kept; the row is found by its primary key. A workflow step
-- that waits for its parents (parked 'deps') is left waiting: only their ends release it.
UPDATE akadze_jobs
SET run_at = now()
WHERE id = :id
    AND state = 'queued'
    AND run_at > now()
    AND parked IS DISTINCT FROM 'deps'
RETURNING id, queue, pg_notify('akadze_jobs', queue) IS NULL AS notified
