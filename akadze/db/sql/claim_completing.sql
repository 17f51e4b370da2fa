-- claim_completing: the worker's one statement per claim cycle. It writes the outcomes of :batch
-- (done: {write_outcomes}), then claims up to :limit ready jobs of :queues ({ready_jobs},
-- claimed), and commits both at once; with no outcomes it only claims, and with no queues (and
-- :limit 0) it only writes (the completer, complete_tx). A workflow step it ends, by an outcome
-- or cancelled at its claim, releases or cancels the steps that wait for it in the same
-- statement ({settle_steps}). Its rows are the claimed jobs and the written ones
-- ({claim_reply}), then the workflow steps their ends released or cancelled (written NULL, the
-- same columns as the written ones).
--
-- A batch none of whose outcomes is a workflow step is written by a plain form of it
-- (claim_completing_plain.sql, claim_completing_plain_many.sql): this statement without the
-- settle step, whose CTEs cost every run, steps or not (0.15-0.2 ms of the server's 1.2 ms for
-- 50 outcomes and 50 claims, nothing to settle: their plan nodes are started and ended all the
-- same; docs/performance.md, "The plain drain"), and reading the ready jobs one way only.
--
-- A job cancelled or expired before it starts ends cancelled here without running. The run
-- counter grows at every claim and fences every later write of this run.
--
-- The two writes cannot meet: done updates running jobs owned by the runs it names, claimed
-- locks and updates jobs that are queued in the statement's snapshot, which every part of a
-- statement shares (a job done sends back to queued is claimed by a later statement).
WITH RECURSIVE {write_outcomes},
{ready_jobs},
claimed AS (
    UPDATE akadze_jobs AS j
    SET
        {claim_set}
    WHERE j.ctid = ANY(ARRAY(SELECT per_queue.tid FROM per_queue UNION ALL SELECT across_queues.tid FROM across_queues))
    {claim_returning}
),
-- the workflow steps this statement ended (by an outcome, or cancelled at claim): their
-- waiting children are released or cancelled with them ({settle_steps}, db/sql.py)
ended AS (
    SELECT done.id, done.step, done.state
    FROM done
    WHERE done.workflow_id IS NOT NULL
        AND done.state IN ('succeeded', 'failed', 'cancelled')
    UNION ALL
    {claimed_cancelled_steps}
),
{settle_steps}
{claim_reply}
UNION ALL
SELECT {settled_reply}, NULL, settled.notified
FROM settled
