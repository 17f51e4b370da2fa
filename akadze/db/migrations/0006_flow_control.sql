-- 0006_flow_control: unique jobs (a key per job, unique while the job is in one of its blocking
-- states) and limits (permit rows that the claim takes; docs/flow-control.md).
-- Columns without a default: no table rewrite, and a job without a key costs a null bit.

ALTER TABLE akadze_jobs ADD COLUMN unique_key text;
ALTER TABLE akadze_jobs ADD COLUMN unique_states text[];

-- One job per key among the jobs in their blocking states: racing producers, batches and
-- generated clients all meet here (INSERT ... ON CONFLICT DO NOTHING). Rows without a key are
-- not in it, so the plain enqueue does not maintain it.
CREATE UNIQUE INDEX akadze_jobs_unique_idx
    ON akadze_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state = ANY (unique_states);

-- A permit: slot number `slot` of limit group `grp` ('c' concurrency or 'r' rate, then the task
-- and the key's value as JSON). The claim takes a permit by writing its job, run and transaction
-- here. A concurrency permit is free once its job no longer runs with that run (ended, put back
-- or rescued: nothing has to give it back, so a killed worker leaks nothing); a rate permit is
-- free from free_at (its start plus the window). No session state and no lock outlives a claim.
CREATE TABLE akadze_limit_slots (
    grp text NOT NULL,
    slot integer NOT NULL,
    job_id bigint NOT NULL,
    run integer NOT NULL,
    -- the claim's transaction: a claim whose snapshot does not see it treats the permit as taken
    taken_by xid8 NOT NULL,
    taken_at timestamptz NOT NULL,
    -- rate permits: free from then on; NULL for concurrency permits
    free_at timestamptz,
    PRIMARY KEY (grp, slot)
);
