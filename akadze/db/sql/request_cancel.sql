-- request_cancel: a queued job ends cancelled at once; a running one is marked, and its run
-- decides at completion (spec: Cancel). A queued workflow step (waiting or ready) takes the
-- steps after it along ({settle_steps}). Other states and missing ids change nothing.
-- Returns the previous state with the row, for on_transition hooks. A queued job a waiter
-- marked (mark_awaited) sends its id on akadze_done as it ends. The JSON columns come back as
-- text ({job_row}, db/sql.py), decoded by the caller per row (a row nested too deep to decode
-- is still cancelled).
WITH RECURSIVE old AS (
    SELECT id, state
    FROM akadze_jobs
    WHERE id = :id
        AND state IN ('queued', 'running')
    FOR UPDATE
),
{cancel_old},
-- a queued workflow step cancelled here: its waiting children are cancelled with it, or
-- released if they run whatever their parents' end ({settle_steps}, db/sql.py)
ended AS (
    SELECT done.id, done.step, done.state
    FROM done
    WHERE done.workflow_id IS NOT NULL
        AND done.state = 'cancelled'
),
{settle_steps}
SELECT
    {job_row},
    from_state,
    CASE WHEN awaited AND state = 'cancelled' THEN pg_notify('akadze_done', CAST(id AS text)) END AS notified
FROM done
