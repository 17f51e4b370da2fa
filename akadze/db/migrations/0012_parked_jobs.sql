-- 0012_parked_jobs: a queued job may be parked, held out of the claim until something releases
-- it: a workflow step waiting for its parents ('deps'), a job its Limit holds back ('limit').
-- The claim indexes hold only the claimable queued jobs (parked IS NULL), so however many jobs
-- are parked the claim never reads them; akadze_jobs_parked_idx finds them per queue and kind.
-- A job writes these entries when it is enqueued, parked or released; claims, completions and
-- finished rows never touch them. The claim indexes are built again (inside this migration's
-- transaction: enqueue, claims and completions wait while they build, docs/schema.md).
ALTER TABLE akadze_jobs ADD COLUMN parked text;
DROP INDEX akadze_jobs_claim_idx;
CREATE INDEX akadze_jobs_claim_idx
    ON akadze_jobs (queue, priority DESC, run_at, id)
    WHERE state = 'queued' AND parked IS NULL;
DROP INDEX akadze_jobs_claim_many_idx;
CREATE INDEX akadze_jobs_claim_many_idx
    ON akadze_jobs (priority DESC, run_at, id)
    WHERE state = 'queued' AND queue <> '' AND parked IS NULL;
CREATE INDEX akadze_jobs_parked_idx
    ON akadze_jobs (queue, parked)
    WHERE state = 'queued' AND parked IS NOT NULL;
