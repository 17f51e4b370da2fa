-- rollup_job_stats_minutes: one step of the trends' rollup (akadze/worker/trends.py): counts the
-- jobs that finished from the mark (akadze_job_stats_mark.minutes_until) on, whole minutes of
-- about :chunk_rows jobs at most, and never past the minute that ended :settle_s seconds ago (a commit that lands later than that after its now() is not counted),
-- into one row of akadze_job_stats per minute, queue, task and final state, with the histogram
-- of the runs' durations (bucket floor(:per_doubling * log2(microseconds)), at most
-- :top_bucket); then moves the mark. Reads the range of akadze_jobs_prune_idx and those rows;
-- writes nothing to akadze_jobs. Only the holder of the transaction-scoped advisory lock
-- :lock_key works (one worker at a time; no session state, so it passes PgBouncer). Returns
-- whether it held the lock, whether the mark exists (start_job_stats_mark.sql makes it), the
-- rows written, and whether finished jobs wait beyond this step (behind).
WITH roller AS (
    SELECT pg_try_advisory_xact_lock(CAST(:lock_key AS bigint)) AS locked
),
mark AS (
    SELECT m.minutes_until
    FROM akadze_job_stats_mark AS m
    WHERE m.id = 1
        AND (SELECT roller.locked FROM roller)
    FOR UPDATE
),
cutoff AS (
    SELECT date_trunc('minute', now() - make_interval(secs => CAST(:settle_s AS double precision))) AS at
),
first AS (
    -- where the step starts and how far it goes, from akadze_jobs_prune_idx in its order, in one
    -- read of at most :chunk_rows + 1 entries past the mark: the minute of the first finished
    -- job, and the minute of the job past the :chunk_rows-th (a backlog is rolled up in steps of
    -- about that many jobs; a minute is never split)
    SELECT
        date_trunc('minute', min(p.finished_at)) AS at,
        date_trunc('minute', max(p.finished_at) FILTER (WHERE p.n > CAST(:chunk_rows AS integer))) AS far
    FROM (
        SELECT j.finished_at, row_number() OVER (ORDER BY j.finished_at) AS n
        FROM akadze_jobs AS j
        WHERE j.state IN ('succeeded', 'failed', 'cancelled')
            AND j.finished_at >= (SELECT mark.minutes_until FROM mark)
        ORDER BY j.finished_at
        LIMIT CAST(:chunk_rows AS integer) + 1
    ) AS p
),
bounds AS (
    SELECT
        mark.minutes_until AS lo,
        least(
            cutoff.at,
            greatest(coalesce(first.at, cutoff.at) + interval '1 minute', coalesce(first.far, cutoff.at))
        ) AS hi,
        cutoff.at AS cutoff
    FROM mark
    CROSS JOIN cutoff
    CROSS JOIN first
    WHERE cutoff.at > mark.minutes_until
),
finished AS (
    SELECT
        date_trunc('minute', j.finished_at) AS at,
        j.queue,
        j.task,
        j.state,
        CASE
            WHEN j.state <> 'cancelled' AND j.started_at IS NOT NULL AND j.finished_at >= j.started_at
                THEN CAST(least(
                    CAST(:top_bucket AS integer),
                    floor(
                        CAST(:per_doubling AS integer)
                        * ln(greatest(CAST(1 AS double precision), date_part('epoch', j.finished_at - j.started_at) * 1e6))
                        / ln(CAST(2 AS double precision))
                    )
                ) AS smallint)
        END AS bucket
    FROM bounds
    INNER JOIN akadze_jobs AS j
        ON j.finished_at >= bounds.lo AND j.finished_at < bounds.hi
    WHERE j.state IN ('succeeded', 'failed', 'cancelled')
),
per_bucket AS MATERIALIZED (
    SELECT f.at, f.queue, f.task, f.state, f.bucket, count(*) AS n
    FROM finished AS f
    GROUP BY f.at, f.queue, f.task, f.state, f.bucket
),
per_row AS (
    SELECT
        b.at,
        b.queue,
        b.task,
        b.state,
        CAST(sum(b.n) AS integer) AS jobs,
        coalesce(array_agg(b.bucket ORDER BY b.bucket) FILTER (WHERE b.bucket IS NOT NULL), '{}') AS run_buckets,
        coalesce(
            array_agg(CAST(b.n AS integer) ORDER BY b.bucket) FILTER (WHERE b.bucket IS NOT NULL), '{}'
        ) AS run_counts
    FROM per_bucket AS b
    GROUP BY b.at, b.queue, b.task, b.state
),
written AS (
    INSERT INTO akadze_job_stats (minutes, at, queue, task, state, jobs, run_buckets, run_counts)
    SELECT 1, r.at, r.queue, r.task, r.state, r.jobs, r.run_buckets, r.run_counts
    FROM per_row AS r
    RETURNING 1
),
moved AS (
    UPDATE akadze_job_stats_mark AS m
    SET minutes_until = bounds.hi
    FROM bounds
    WHERE m.id = 1
    RETURNING m.minutes_until
)
SELECT
    (SELECT roller.locked FROM roller) AS locked,
    EXISTS (SELECT 1 FROM mark) AS marked,
    (SELECT count(*) FROM written) AS written,
    coalesce((SELECT bounds.hi < bounds.cutoff FROM bounds), false) AS behind
