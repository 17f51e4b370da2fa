-- 0008_claim_many_queues: the claim index of a worker that serves many queues (claim_many.sql).
-- The same entries as akadze_jobs_claim_idx without the queue in front, so one ordered scan
-- meets the ready jobs of every queue in claim order, instead of one probe per queue per claim.
-- Partial on the queued state like the first: a job writes it once, when it is enqueued (or
-- put back to queued), and claim, completion and finished rows never touch it.
-- queue <> '' is true of every job (queue names are never empty) and only claim_many.sql says
-- it: claim.sql, which names one queue per scan, cannot be planned on this index whatever the
-- statistics say (on it, a scan for one queue would read every queue's jobs).
CREATE INDEX akadze_jobs_claim_many_idx
    ON akadze_jobs (priority DESC, run_at, id)
    WHERE state = 'queued' AND queue <> '';
