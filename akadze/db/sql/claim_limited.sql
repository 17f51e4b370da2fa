-- claim_limited: the claim of a worker whose tasks have a Limit (a worker without one runs
-- claim_completing.sql). A limited job counts in its group (task and key value as JSON text),
-- one row of akadze_limit_groups; the :l_* arrays are the limits, one item per task: name, key
-- argument or null, concurrency, rate, per (s).
-- Per queue, one scan of akadze_jobs_claim_idx in the claim's order takes other tasks' jobs and
-- the limited tasks' jobs whose group looks to have room, and walks past the others, so held
-- jobs never fill the claim and the same claim takes the other ready jobs. The scans lock what
-- they take FOR UPDATE SKIP LOCKED (rows taken and then not claimed are released at commit).
-- Then each group wanted is written once, in group order (two claims wait on each other's
-- groups in one order, for the length of a claim, and cannot deadlock): ON CONFLICT DO UPDATE
-- locks the row's latest version and grants from it. `running` is an upper bound of the group's
-- runs (claims add their grants; ends never write the row): while the grant fits under it,
-- nothing is counted; past it, the runs are counted (akadze_jobs_limit_idx, whose predicate the
-- counts repeat: "running" spelled as the other states excluded) when the row's last
-- writer is in this statement's snapshot, else only what fits under the stored bound is
-- granted. So a place cannot leak: a run that ended, was put back or was rescued is simply not
-- counted. The rate window is the row's start times, read and rewritten under the same lock.
-- Of each group's jobs, the first `granted` in the claim's order are claimed; the others stay
-- queued and spend nothing. A cancelled or expired job ends at claim without counting. A paused queue
-- (akadze_queue_pauses) is skipped by every scan, as in claim_completing.sql.
WITH snap AS (
    -- this statement's snapshot, read once: a group row written by a claim it does not see
    -- is trusted as it is
    SELECT pg_current_snapshot() AS snapshot
),
limits AS (
    SELECT
        l.task,
        l.key,
        l.conc,
        l.rate,
        make_interval(secs => l.per_s) AS per,
        CAST(jsonb_build_array(l.task, NULL) AS text) AS whole
    FROM unnest(
        CAST(:l_task AS text[]),
        CAST(:l_key AS text[]),
        CAST(:l_conc AS integer[]),
        CAST(:l_rate AS integer[]),
        CAST(:l_per AS double precision[])
    ) AS l(task, key, conc, rate, per_s)
),
lim AS MATERIALIZED (
    -- a task without a key is one group, whose room is read once per claim. MATERIALIZED: as
    -- a table of a few rows the scan below stays a walk of the claim index in its order (inlined,
    -- the planner may hash-join it to a sequential scan of akadze_jobs, then sort)
    SELECT
        l.task,
        l.key,
        l.conc,
        l.rate,
        l.per,
        l.whole,
        l.key IS NOT NULL OR COALESCE(
            (
                SELECT
                    (l.conc IS NULL OR g.running < l.conc OR l.conc > (
                        SELECT count(*) FROM akadze_jobs AS r WHERE r.limit_grp = g.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
                    ))
                    AND (l.rate IS NULL OR l.rate > (
                        SELECT count(*) FROM unnest(g.starts) AS s(at) WHERE s.at > now() - l.per
                    ))
                FROM akadze_limit_groups AS g
                WHERE g.grp = l.whole
            ),
            l.conc IS NULL OR l.conc > (
                SELECT count(*)
                FROM akadze_jobs AS r
                WHERE r.limit_grp = l.whole AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
            )
        ) AS room
    FROM limits AS l
),
full_groups AS MATERIALIZED (
    -- the keyed concurrency groups at their cap, counted once per claim from the running jobs
    -- of limited tasks (akadze_jobs_limit_idx read whole: its rows are running jobs only), so
    -- that the scan tests a keyed job with a hash probe, however many it walks past
    SELECT r.limit_grp AS grp
    FROM akadze_jobs AS r
    JOIN lim AS l ON l.task = r.task
    WHERE r.limit_grp IS NOT NULL
        AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
        AND l.key IS NOT NULL
        AND l.conc IS NOT NULL
    GROUP BY r.limit_grp, l.conc
    HAVING count(*) >= l.conc
),
seen AS (
    -- one scan per queue in the claim's order: other tasks' jobs are taken as they come, a
    -- limited task's job when its group looks to have room (or it ends at claim)
    SELECT p.id, p.priority, p.run_at, p.grp, p.conc, p.rate, p.per
    FROM unnest(CAST(:queues AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.run_at, g.grp, l.conc, l.rate, l.per
        FROM akadze_jobs AS j
        LEFT JOIN lim AS l ON l.task = j.task
        CROSS JOIN LATERAL (
            SELECT
                e.exempt,
                CASE
                    WHEN e.exempt THEN NULL
                    WHEN l.key IS NULL THEN l.whole
                    ELSE CAST(jsonb_build_array(j.task, j.args -> l.key) AS text)
                END AS grp
            FROM (
                SELECT l.task IS NULL OR j.cancel_requested OR COALESCE(j.expires_at <= now(), false) AS exempt
            ) AS e
        ) AS g
        WHERE j.state = 'queued'
            AND j.parked IS NULL
            AND j.queue = q.name
            AND j.run_at <= now()
            AND NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
            AND CASE
                WHEN g.exempt THEN true
                WHEN NOT l.room THEN false
                WHEN l.key IS NULL THEN true
                WHEN g.grp IN (SELECT f.grp FROM full_groups AS f) THEN false
                WHEN l.rate IS NULL THEN true
                ELSE COALESCE(
                    (
                        SELECT l.rate > (SELECT count(*) FROM unnest(k.starts) AS s(at) WHERE s.at > now() - l.per)
                        FROM akadze_limit_groups AS k
                        WHERE k.grp = g.grp
                    ),
                    true
                )
            END
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT CAST(:limit AS bigint)
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
),
ordered AS (
    -- the claim's first :limit jobs, each with its place in its group (k)
    SELECT
        f.id,
        f.grp,
        f.conc,
        f.rate,
        f.per,
        row_number() OVER (PARTITION BY f.grp ORDER BY f.priority DESC, f.run_at, f.id) AS k
    FROM (
        SELECT s.id, s.grp, s.conc, s.rate, s.per, s.priority, s.run_at
        FROM seen AS s
        ORDER BY s.priority DESC, s.run_at, s.id
        LIMIT CAST(:limit AS bigint)
    ) AS f
),
wanted AS (
    SELECT
        o.grp,
        count(*) AS wanted,
        min(o.conc) AS conc,
        min(o.rate) AS rate,
        min(o.per) AS per,
        array_agg(o.id ORDER BY o.k) AS ids
    FROM ordered AS o
    WHERE o.grp IS NOT NULL
    GROUP BY o.grp
),
granted AS (
    INSERT INTO akadze_limit_groups AS g (grp, running, starts, started, granted, taken_by, taken_at)
    SELECT
        n.grp,
        CASE WHEN n.conc IS NULL THEN 0 ELSE n.base + n.grant END,
        CASE WHEN n.rate IS NULL THEN '{}' ELSE array_fill(now(), ARRAY[n.grant]) END,
        CASE WHEN n.rate IS NULL THEN '{}' ELSE n.ids[1:n.grant] END,
        n.grant,
        pg_current_xact_id(),
        now()
    FROM (
        SELECT
            c.*,
            CAST(greatest(least(c.wanted, c.conc - c.base, c.rate), 0) AS integer) AS grant
        FROM (
            SELECT
                w.grp,
                w.wanted,
                w.conc,
                w.rate,
                w.ids,
                -- a group new to this snapshot: its runs are counted (0 when it has none); an
                -- existing one goes to ON CONFLICT, which reads its latest version. A scalar
                -- probe, not EXISTS, which a generic plan may turn into a hash of the whole table
                CASE
                    WHEN w.conc IS NULL OR (SELECT true FROM akadze_limit_groups AS x WHERE x.grp = w.grp) THEN 0
                    ELSE (SELECT count(*) FROM akadze_jobs AS r WHERE r.limit_grp = w.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled'))
                END AS base
            FROM wanted AS w
            -- OFFSET 0: evaluated once per group, not once per use of base
            OFFSET 0
        ) AS c
    ) AS n
    ORDER BY n.grp
    ON CONFLICT (grp) DO UPDATE
    SET (running, starts, started, granted, taken_by, taken_at) = (
        SELECT
            CASE WHEN v.conc IS NULL THEN 0 ELSE v.base + v.grant END,
            CASE WHEN v.rate IS NULL THEN '{}' ELSE v.kept_starts || array_fill(now(), ARRAY[v.grant]) END,
            CASE WHEN v.rate IS NULL THEN '{}' ELSE v.kept_started || v.ids[1:v.grant] END,
            v.grant,
            pg_current_xact_id(),
            now()
        FROM (
            SELECT
                u.*,
                -- least() skips the nulls of the kinds a limit does not have
                CAST(greatest(least(u.wanted, u.conc - u.base, u.rate - cardinality(u.kept_starts)), 0) AS integer)
                    AS grant
            FROM (
                SELECT
                    w.wanted,
                    w.conc,
                    w.rate,
                    w.ids,
                    CASE
                        WHEN w.conc IS NULL OR g.running + w.wanted <= w.conc THEN g.running
                        -- the last writer is in this snapshot, and so is every earlier one: count
                        WHEN pg_visible_in_snapshot(g.taken_by, (SELECT snapshot FROM snap)) THEN (
                            SELECT count(*) FROM akadze_jobs AS r WHERE r.limit_grp = g.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
                        )
                        ELSE g.running
                    END AS base,
                    CASE WHEN w.rate IS NULL THEN '{}' ELSE COALESCE(
                        (SELECT array_agg(s.at ORDER BY s.n) FROM unnest(g.starts) WITH ORDINALITY AS s(at, n) WHERE s.at > now() - w.per),
                        '{}'
                    ) END AS kept_starts,
                    CASE WHEN w.rate IS NULL THEN '{}' ELSE COALESCE(
                        (
                            SELECT array_agg(s.id ORDER BY s.n)
                            FROM unnest(g.starts, g.started) WITH ORDINALITY AS s(at, id, n)
                            WHERE s.at > now() - w.per
                        ),
                        '{}'
                    ) END AS kept_started
                FROM wanted AS w
                WHERE w.grp = EXCLUDED.grp
                OFFSET 0
            ) AS u
        ) AS v
    )
    RETURNING g.grp, g.granted
)
UPDATE akadze_jobs AS j
SET
    {claim_set},
    limit_grp = CASE WHEN o.conc IS NOT NULL THEN o.grp END
FROM ordered AS o
LEFT JOIN granted AS t ON t.grp = o.grp
WHERE j.id = o.id
    -- the rows to update named by key as well: the generic plan, which estimates a
    -- parameterized LIMIT at a tenth of the table, otherwise may hash-join a sequential scan
    -- of akadze_jobs when the table is small (seen in a CI run with 20,000 rows)
    AND j.id = ANY (ARRAY(SELECT o2.id FROM ordered AS o2))
    AND (o.grp IS NULL OR o.k <= t.granted)
{claim_returning}
