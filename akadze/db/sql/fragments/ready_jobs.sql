-- {ready_jobs}: the ready jobs a claim takes (claim_completing.sql), locked, as the CTEs per_queue
-- and across_queues (their tids; the claim's UPDATE reads them). Up to :limit jobs of :queues,
-- highest priority first, then run_at, then id, reading a claim index in its own order, so
-- statistics cannot flip the plan; SKIP LOCKED, so claimers never wait. Up to :many_queues
-- queues one queue at a time ({per_queue}); past them (a thousand queues would be a thousand
-- probes) one walk over every queue ({across_queues}). The branch not taken is cut by its
-- constant condition before it reads anything, but its plan nodes are started and ended at
-- every run all the same: the plain forms of the claim (claim_completing_plain.sql,
-- claim_completing_plain_many.sql) name only the branch they take. A paused queue
-- (akadze_queue_pauses) is skipped before its rows are read.
{per_queue},
{across_queues}
