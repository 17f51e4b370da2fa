-- request_cancel: a queued job ends cancelled at once; a running one is marked, and its run
-- decides at completion (spec: Cancel). Other states and missing ids change nothing.
-- Returns the previous state with the row, for on_transition hooks.
WITH old AS (
    SELECT id, state
    FROM akadze_jobs
    WHERE id = :id
        AND state IN ('queued', 'running')
    FOR UPDATE
)
UPDATE akadze_jobs AS j
SET
    cancel_requested = true,
    state = CASE WHEN old.state = 'queued' THEN 'cancelled' ELSE j.state END,
    finished_at = CASE WHEN old.state = 'queued' THEN now() ELSE j.finished_at END
FROM old
WHERE j.id = old.id
RETURNING j.*, old.state AS from_state
