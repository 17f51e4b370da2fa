-- run_now: a queued job that waits for its run_at (delayed, retried or snoozed) becomes ready
-- now, and its queue's workers are woken. Any other job changes nothing (no row returned).
-- Attempt, errors and args are kept; the row is found by its primary key.
UPDATE akadze_jobs
SET run_at = now()
WHERE id = :id
    AND state = 'queued'
    AND run_at > now()
RETURNING id, queue, pg_notify('akadze_jobs', queue) IS NULL AS notified
