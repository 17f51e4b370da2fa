-- 0014_job_trends: what the dashboard's trends read (docs/dashboard.md, "Trends"): per minute and
-- per hour, per queue, task and final state, how many jobs finished and a histogram of their run
-- times. A worker service (akadze/worker/trends.py) writes it from the finished rows of
-- akadze_jobs once a minute, one worker at a time; the outcome statements write nothing here.
--
-- run_buckets and run_counts are a sparse histogram of the runs' durations (finished_at -
-- started_at of the last attempt; succeeded and failed jobs): bucket b holds the runs of
-- 2^(b/4) to 2^((b+1)/4) microseconds, so that any percentile read from it is within 19% of the
-- true one. Minute rows are kept two days, hour rows five weeks (the dashboard's ranges with
-- room; pruned by the same service).
CREATE TABLE akadze_job_stats (
    minutes integer NOT NULL CHECK (minutes IN (1, 60)),
    at timestamptz NOT NULL,
    queue text NOT NULL,
    task text NOT NULL,
    state text NOT NULL CHECK (state IN ('succeeded', 'failed', 'cancelled')),
    jobs integer NOT NULL,
    run_buckets smallint[] NOT NULL,
    run_counts integer[] NOT NULL,
    PRIMARY KEY (minutes, at, queue, task, state)
);

-- How far the rollup has gone: minute rows exist for the jobs that finished before
-- minutes_until, hour rows for the hours before hours_until. One row; the service makes it on
-- its first pass (start_job_stats_mark.sql), from the finished jobs still kept.
CREATE TABLE akadze_job_stats_mark (
    id integer PRIMARY KEY DEFAULT 1 CHECK (id = 1),
    minutes_until timestamptz NOT NULL,
    hours_until timestamptz NOT NULL
);
