-- claim_completing_plain: claim_completing.sql for a batch of outcomes none of which is a
-- workflow step (or no outcome): the same write ({write_outcomes}) and claim ({ready_jobs}) in
-- one statement, without the settle step ({settle_steps}), whose CTEs cost every run of a
-- statement that names them, steps or not (docs/performance.md). So that no workflow step ends
-- here, a ready step that would end at its claim (cancel requested or expired before its run:
-- {claim_gone}) is passed over: locked but left queued, and a last row, every column NULL,
-- says that the statement claimed fewer jobs than it picked. RunQueries.claim_completing_plain
-- then claims again with claim_completing.sql, which ends such a step and settles the steps
-- after it in one statement. Every other job is claimed, or ends at its claim, as there.
-- Rows: {claim_reply}, then that last row if a job was passed over.
WITH RECURSIVE {write_outcomes},
{ready_jobs},
picked AS (
    SELECT per_queue.tid
    FROM per_queue
    UNION ALL
    SELECT across_queues.tid
    FROM across_queues
),
claimed AS (
    UPDATE akadze_jobs AS j
    SET
        {claim_set}
    WHERE j.ctid = ANY(ARRAY(SELECT picked.tid FROM picked))
        AND (j.workflow_id IS NULL OR ({claim_gone}) IS NOT TRUE)
    {claim_returning}
)
{claim_reply}
UNION ALL
SELECT {no_job_row}, NULL, NULL
WHERE (SELECT count(*) FROM claimed) < (SELECT count(DISTINCT picked.tid) FROM picked)
