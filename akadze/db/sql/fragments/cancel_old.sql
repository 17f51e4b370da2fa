-- {cancel_old}: the cancel of the locked jobs of a CTE named old (id, their state before):
-- a queued one ends cancelled now, a running one is marked and its run decides at completion
-- (spec: Cancel). A CTE named done, the rows as written with their state before (from_state).
-- request_cancel.sql cancels one job this way, cancel_workflow.sql a workflow's steps.
done AS (
    UPDATE akadze_jobs AS j
    SET
        cancel_requested = true,
        state = CASE WHEN old.state = 'queued' THEN 'cancelled' ELSE j.state END,
        finished_at = CASE WHEN old.state = 'queued' THEN now() ELSE j.finished_at END
    FROM old
    WHERE j.id = old.id
    RETURNING j.*, old.state AS from_state
)
