-- rollup_job_stats_hours: sums the minute rows of every hour that the minute rollup has passed
-- (from akadze_job_stats_mark.hours_until to the hour of minutes_until) into one hour row per
-- queue, task and state, histograms added bucket by bucket, and moves hours_until. Runs after
-- rollup_job_stats_minutes in its transaction, under its lock. Reads a range of the table's
-- primary key. Returns the hour rows written.
WITH mark AS (
    SELECT m.hours_until AS lo, date_trunc('hour', m.minutes_until) AS hi
    FROM akadze_job_stats_mark AS m
    WHERE m.id = 1
    FOR UPDATE
),
picked AS (
    SELECT date_trunc('hour', s.at) AS at, s.queue, s.task, s.state, s.jobs, s.run_buckets, s.run_counts
    FROM akadze_job_stats AS s
    CROSS JOIN mark
    WHERE s.minutes = 1
        AND s.at >= mark.lo
        AND s.at < mark.hi
),
totals AS (
    SELECT p.at, p.queue, p.task, p.state, CAST(sum(p.jobs) AS integer) AS jobs
    FROM picked AS p
    GROUP BY p.at, p.queue, p.task, p.state
),
buckets AS (
    SELECT p.at, p.queue, p.task, p.state, h.bucket, sum(h.n) AS n
    FROM picked AS p
    CROSS JOIN LATERAL unnest(p.run_buckets, p.run_counts) AS h(bucket, n)
    GROUP BY p.at, p.queue, p.task, p.state, h.bucket
),
histograms AS (
    SELECT
        b.at,
        b.queue,
        b.task,
        b.state,
        array_agg(b.bucket ORDER BY b.bucket) AS run_buckets,
        array_agg(CAST(b.n AS integer) ORDER BY b.bucket) AS run_counts
    FROM buckets AS b
    GROUP BY b.at, b.queue, b.task, b.state
),
written AS (
    INSERT INTO akadze_job_stats (minutes, at, queue, task, state, jobs, run_buckets, run_counts)
    SELECT
        60,
        t.at,
        t.queue,
        t.task,
        t.state,
        t.jobs,
        coalesce(h.run_buckets, '{}'),
        coalesce(h.run_counts, '{}')
    FROM totals AS t
    LEFT JOIN histograms AS h
        ON h.at = t.at AND h.queue = t.queue AND h.task = t.task AND h.state = t.state
    RETURNING 1
),
moved AS (
    UPDATE akadze_job_stats_mark AS m
    SET hours_until = mark.hi
    FROM mark
    WHERE m.id = 1 AND mark.hi > mark.lo
    RETURNING 1
)
SELECT (SELECT count(*) FROM written) AS written
