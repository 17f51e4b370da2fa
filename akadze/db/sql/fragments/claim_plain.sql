-- {claim_plain}: the claim and the reply of the plain forms of the worker's claim
-- (claim_completing_plain.sql, claim_completing_plain_many.sql), which name the CTE picked (the
-- tids of the ready jobs they took). Each picked job is claimed, or ends at its claim, as in
-- claim_completing.sql, except a workflow step that would end at its claim (cancel requested or
-- expired before its run: {claim_gone}): so that no step ends where nothing settles the steps
-- after it, it is passed over, locked but left queued, and a last row, every column NULL, says
-- that the statement claimed fewer jobs than it picked. Rows: {claim_reply}, then that row.
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
