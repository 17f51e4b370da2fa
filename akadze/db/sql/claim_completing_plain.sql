-- claim_completing_plain: claim_completing.sql for a batch of outcomes none of which is a
-- workflow step (or no outcome), on a worker of up to :many_queues queues (MANY_QUEUES, 8): the
-- same write ({write_outcomes}) and claim, one queue at a time ({per_queue}), in one statement,
-- without the settle step ({settle_steps}) and the walk over every queue ({across_queues}),
-- whose CTEs cost every run of a statement that names them, whether they read anything or not
-- (docs/performance.md, "The plain drain"). The drain of a worker of a few queues runs this
-- statement and nothing else. A workflow step that would end at its claim is passed over
-- ({claim_plain}); RunQueries then claims again with claim_completing.sql, which ends it and
-- settles the steps after it in one statement.
WITH RECURSIVE {write_outcomes},
{per_queue},
picked AS (
    SELECT per_queue.tid
    FROM per_queue
),
{claim_plain}
