-- cancel_workflow: every unfinished step of a workflow at once, as request_cancel does one
-- job: a queued step (waiting for its parents or ready) ends cancelled now; a running one is
-- marked, and its run decides at completion. Finished steps are left as they are. Relies on
-- akadze_jobs_workflow_open_idx. The steps are locked in id order, the order every statement
-- that ends steps locks them in (a parent's id is below its children's: enqueue_workflow
-- inserts parents first), so it cannot deadlock with a completion. Since every waiting step
-- ends here, no step is left to release. Returns the previous state with each row; the waited
-- ones (mark_awaited) send their id on akadze_done.
WITH old AS (
    SELECT id, state
    FROM akadze_jobs
    WHERE workflow_id = CAST(:workflow_id AS bigint)
        AND state IN ('queued', 'running')
    ORDER BY id
    FOR UPDATE
),
{cancel_old}
SELECT
    {job_row},
    from_state,
    CASE WHEN awaited AND state = 'cancelled' THEN pg_notify('akadze_done', CAST(id AS text)) END AS notified
FROM done
ORDER BY id
