-- 0007_limit_groups: limits as one row per group instead of one permit row per run
-- (docs/flow-control.md). A claim of a limited job writes its group's row once per claim, and
-- the job carries its concurrency group while it runs; nothing else writes either, so a run
-- ends (completion, rescue, put-back) exactly as a job without a limit does.

-- The concurrency group this job's run counts in (set by claim_limited, NULL otherwise). It is
-- read only while the job runs: the index holds running jobs that have one, so that the claim
-- counts a group's runs with one probe. The column has no default: no table rewrite.
ALTER TABLE akadze_jobs ADD COLUMN limit_grp text;

-- "Running" spelled as the other states excluded (the same rows, by the state CHECK): the
-- counts in claim_limited.sql say it the same way, which akadze_jobs_running_idx
-- (state = 'running') cannot serve, so the planner cannot prefer reading that index whole,
-- whatever the statistics say (it did, on a table analyzed while nothing ran).
CREATE INDEX akadze_jobs_limit_idx
    ON akadze_jobs (limit_grp)
    WHERE limit_grp IS NOT NULL AND state NOT IN ('queued', 'succeeded', 'failed', 'cancelled');

-- One row per limit group (the task and the key's value, as JSON text). `running` is an upper
-- bound of the group's running jobs: claims add what they grant, and only a claim that would
-- pass the cap counts the runs again (akadze_jobs_limit_idx); ends never write here, so a
-- killed worker leaks nothing. `starts`/`started`: the rate window, the start times and jobs of
-- the starts within it. `taken_by`: the last claim that wrote the row; a claim whose snapshot
-- does not see it cannot trust its own count of the runs, and keeps to `running`.
CREATE TABLE akadze_limit_groups (
    grp text PRIMARY KEY,
    running integer NOT NULL,
    starts timestamptz[] NOT NULL,
    started bigint[] NOT NULL,
    -- what the last claim granted (RETURNING reads it back)
    granted integer NOT NULL,
    taken_by xid8 NOT NULL,
    taken_at timestamptz NOT NULL
) WITH (fillfactor = 50);

-- The permit rows of 0006 are replaced by the rows above.
DROP TABLE akadze_limit_slots;
