-- claim_completing_plain_many: claim_completing_plain.sql for a worker of more than :many_queues
-- queues (MANY_QUEUES, 8): the same write ({write_outcomes}) and claim in one statement, the
-- ready jobs read in one walk over every queue ({across_queues}) rather than one queue at a
-- time, without the settle step ({settle_steps}). A workflow step that would end at its claim
-- is passed over ({claim_plain}), as there.
WITH RECURSIVE {write_outcomes},
{across_queues},
picked AS (
    SELECT across_queues.tid
    FROM across_queues
),
{claim_plain}
