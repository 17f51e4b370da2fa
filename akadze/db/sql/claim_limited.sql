-- claim_limited: the claim of a worker whose tasks have a Limit (a worker without one runs
-- claim_completing.sql). A limited job counts in its group (task and key value as JSON text),
-- one row of akadze_limit_groups; the :l_* arrays are the limits, one item per task: name, key
-- argument or null, concurrency, rate, per (s). A keyed Limit with neither concurrency nor rate
-- is a fair share: its keys are served in turn, with no ceiling.
--
-- Held jobs leave the claim index (docs/flow-control.md, "Held jobs are parked"). A job of a
-- group found full is parked (parked = 'limit', its group in limit_grp) by the claim that met
-- it, so no later claim reads it again; a group with parked jobs has a due_at, and a claim takes
-- parked jobs of the due groups (and of the groups of :freed, the limited jobs this worker has
-- ended since its last claim) straight from akadze_jobs_limit_parked_idx, in claim order, up to
-- the room it finds. So whatever the number of held jobs, a claim reads the ready jobs of its
-- queues, a few parked ones per group with room, and one probe per due group.
--
-- Parked at enqueue. A producer that knows the task's Limit parks a job due now itself
-- (enqueue_parked.sql) and writes an arrival row for its group in the same statement; a claim
-- finds the groups of the arrival rows it sees (per queue and task, up to :limit groups), looks at
-- their parked jobs as at a due group's, and deletes those rows. A row commits with its jobs, so
-- the claim that deletes it sees them, and a group looked at keeps a due_at while parked jobs may
-- remain (the rules below): no job parked at enqueue is left without a claim to look for it.
--
-- Reading. Per queue, akadze_jobs_claim_idx in claim order, the priorities walked one by one as
-- claim_completing.sql does (delayed jobs above the ready ones are never read), the first
-- :scan entries (the claim's size; more right after a claim that parked: the fetcher passes
-- that). Then the due groups, at most :limit of them, oldest due first (round robin: a group
-- served is due again behind the others). Every job read is locked FOR UPDATE SKIP LOCKED (rows
-- read and not written are released at commit); group rows are locked only where they are
-- written, in group order.
--
-- Fair order. A keyed group's first job in the claim index may be taken (its others there are
-- parked); its parked jobs come from the parked index, a share each (the claim's size divided
-- among the groups and the unlimited jobs it read). The claim's jobs are the first :limit in
-- (priority, place in their group, run_at, id) order: within a priority, the first job of every
-- key before the second of any, the jobs of unlimited tasks counting as one more key.
--
-- Granting (as before parking). Each group the claim wants jobs of, parks jobs of or examined is
-- written once, in group order (two claims wait on each other's groups in one order, for the
-- length of a claim, and cannot deadlock): ON CONFLICT DO UPDATE locks the row's latest version
-- and grants from it. `running` is an upper bound of the group's runs (claims add their grants;
-- ends never write the row): while the grant fits under it nothing is counted; past it the runs
-- are counted (akadze_jobs_limit_idx, whose predicate the counts repeat: "running" spelled as the
-- other states excluded) when the row's last writer is in this statement's snapshot, else only
-- what fits under the stored bound is granted. So a place cannot leak: a run that ended, was put
-- back or was rescued is simply not counted. The rate window is the row's start times, read and
-- rewritten under the same lock. Of each group's wanted jobs the first `granted` are claimed; the
-- others (and the group's jobs that did not fit) are parked, or stay parked, and spend nothing.
-- The row's due_at: now() while the group has parked jobs and room, the next time a place may
-- free while it is full (:recheck_s on, or its rate window's oldest start leaving it), NULL once
-- a claim with room and a snapshot that sees the row's last writer finds no parked job.
-- A cancelled or expired job ends at claim without counting (a workflow step's waiting
-- children with it: {settle_steps}). A paused queue is skipped by every
-- read. A last row with a NULL id says that more jobs may be ready at once: `more` true when
-- the claim parked jobs (others may be ready behind them in the index; the next claim reads
-- further), false when a group gave its whole share of parked jobs (it may have more). The
-- fetcher then claims again at once.
WITH RECURSIVE snap AS (
    -- this statement's snapshot, read once: a group row written by a claim it does not see
    -- is trusted as it is
    SELECT pg_current_snapshot() AS snapshot
),
lim AS MATERIALIZED (
    -- MATERIALIZED: a table of a few rows, so that the reads below stay index walks
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
scanned AS MATERIALIZED (
    -- the claim index, per queue, one priority at a time (claim_completing.sql's walk)
    SELECT p.id, p.priority, p.run_at, p.task, p.args, p.gone
    FROM unnest(CAST(:queues AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE {queue_levels}
        SELECT r.id, r.priority, r.run_at, r.task, r.args, r.gone
        FROM level
        CROSS JOIN LATERAL (
            SELECT
                j.id,
                j.priority,
                j.run_at,
                j.task,
                j.args,
                j.cancel_requested OR COALESCE(j.expires_at <= now(), false) AS gone
            {level_ready}
            LIMIT CAST(:scan AS bigint)
        ) AS r
        LIMIT CAST(:scan AS bigint)
    ) AS p
),
from_index AS (
    -- each job read with its group (NULL: no limit applies, or it ends at claim) and its place
    -- among the group's jobs read here
    SELECT
        g.*,
        row_number() OVER (PARTITION BY g.grp ORDER BY g.priority DESC, g.run_at, g.id) AS n
    FROM (
        SELECT
            s.id,
            s.priority,
            s.run_at,
            CASE
                WHEN l.task IS NULL OR s.gone THEN NULL
                WHEN l.key IS NULL THEN l.whole
                ELSE CAST(jsonb_build_array(s.task, s.args -> l.key) AS text)
            END AS grp
        FROM scanned AS s
        LEFT JOIN lim AS l ON l.task = s.task
    ) AS g
),
arrived AS MATERIALIZED (
    -- the groups of jobs parked by their enqueue (enqueue_parked.sql), from the arrival rows of
    -- this worker's queues (not paused) and limited tasks: per queue and task its distinct
    -- groups, one probe of akadze_limit_arrivals_idx each (a loose index scan), at most :limit
    SELECT a.queue, a.task, a.grp
    FROM unnest(CAST(:queues AS text[])) AS q(name)
    CROSS JOIN lim AS l
    CROSS JOIN LATERAL (
        WITH RECURSIVE walk(grp) AS (
            (
                SELECT x.grp
                FROM akadze_limit_arrivals AS x
                WHERE x.queue = q.name AND x.task = l.task
                ORDER BY x.grp
                LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT x.grp
                FROM akadze_limit_arrivals AS x
                WHERE x.queue = q.name AND x.task = l.task AND x.grp > walk.grp
                ORDER BY x.grp
                LIMIT 1
            )
            FROM walk
            WHERE walk.grp IS NOT NULL
        )
        SELECT q.name AS queue, l.task, walk.grp
        FROM walk
        WHERE walk.grp IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        LIMIT CAST(:limit AS bigint)
    ) AS a
    LIMIT CAST(:limit AS bigint)
),
consumed AS (
    -- the arrival rows of those groups that this statement sees, deleted: this claim looks at the
    -- groups' parked jobs, and it sees every job committed with a row it sees. Rows another claim
    -- holds are skipped (that claim looks at the group), so claims never wait here. At most
    -- 10,000 a claim: a group with more rows (one per enqueue statement) is found again. The
    -- rows by TID through unnest(ARRAY(...)), which a plan takes for 10 whatever the table holds
    DELETE FROM akadze_limit_arrivals AS a
    WHERE a.ctid = ANY (ARRAY(
        SELECT x.tid
        FROM arrived AS r
        CROSS JOIN LATERAL (
            SELECT y.ctid AS tid
            FROM akadze_limit_arrivals AS y
            WHERE y.queue = r.queue AND y.task = r.task AND y.grp = r.grp
            LIMIT 10000
            FOR UPDATE SKIP LOCKED
        ) AS x
        LIMIT 10000
    ))
),
due AS MATERIALIZED (
    -- the groups whose parked jobs this claim looks at: due ones of this worker's tasks, oldest
    -- first, those of jobs parked by their enqueue, and those of the limited jobs this worker
    -- ended since its last claim. Not locked here: the rows are locked where they are written,
    -- in group order
    (
        SELECT d.grp
        FROM akadze_limit_groups AS d
        WHERE d.due_at <= now()
            AND (CAST(d.grp AS jsonb) ->> 0) IN (SELECT lim.task FROM lim)
        ORDER BY d.due_at
        LIMIT CAST(:limit AS bigint)
    )
    UNION
    SELECT arrived.grp FROM arrived
    UNION
    -- one primary-key probe per id (with no id, nothing is read)
    SELECT f.limit_grp
    FROM unnest(CAST(:freed AS bigint[])) AS u(id)
    CROSS JOIN LATERAL (SELECT j.limit_grp FROM akadze_jobs AS j WHERE j.id = u.id) AS f
    WHERE f.limit_grp IS NOT NULL
),
groups AS MATERIALIZED (
    -- every group met, with the room it looks to have in this snapshot (NULL: no ceiling)
    SELECT
        x.grp,
        x.examined,
        l.key,
        l.conc,
        l.rate,
        l.per,
        least(
            l.conc - (
                SELECT count(*)
                FROM akadze_jobs AS r
                WHERE l.conc IS NOT NULL
                    AND r.limit_grp = x.grp
                    AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled')
            ),
            l.rate - COALESCE(
                (
                    SELECT count(*)
                    FROM akadze_limit_groups AS k, unnest(k.starts) AS s(at)
                    WHERE l.rate IS NOT NULL AND k.grp = x.grp AND s.at > now() - l.per
                ),
                0
            )
        ) AS room
    FROM (
        SELECT u.grp, bool_or(u.examined) AS examined
        FROM (
            SELECT f.grp, false AS examined FROM from_index AS f WHERE f.grp IS NOT NULL
            UNION ALL
            SELECT d.grp, true FROM due AS d
        ) AS u
        GROUP BY u.grp
    ) AS x
    JOIN lim AS l ON l.task = (CAST(x.grp AS jsonb) ->> 0)
),
share AS (
    -- the claim's size divided among the groups met and the unlimited jobs read
    SELECT greatest(
        1,
        ceil(
            CAST(:limit AS bigint) / CAST(greatest(
                1,
                (SELECT count(*) FROM groups)
                    + (SELECT count(*) FROM (SELECT 1 FROM from_index AS f WHERE f.grp IS NULL LIMIT 1) AS o)
            ) AS double precision)
        )
    ) AS each
),
asked AS MATERIALIZED (
    -- how many parked jobs the claim reads of each group it examines
    SELECT
        g.grp,
        CAST(greatest(0, least(g.room, (SELECT each FROM share), CAST(:limit AS bigint))) AS bigint) AS ask
    FROM groups AS g
    WHERE g.examined
),
from_parked AS MATERIALIZED (
    -- a group's first parked jobs in claim order: their ids from an index-only walk of
    -- akadze_jobs_limit_parked_idx (the queue is in it), then each row by its key, locked SKIP
    -- LOCKED, until the group's ask is met. Two steps, because a scan that locks reads the
    -- table, and then a plan may prefer reading the whole table to walking a hot group's
    -- million entries in order
    SELECT a.grp, p.id, p.priority, p.run_at, p.gone
    FROM asked AS a
    CROSS JOIN LATERAL (
        SELECT r.id, r.priority, r.run_at, r.gone
        FROM (
            SELECT x.id
            FROM akadze_jobs AS x
            WHERE x.limit_grp = a.grp
                AND x.state = 'queued'
                AND x.parked = 'limit'
                AND x.queue = ANY (CAST(:queues AS text[]))
            ORDER BY x.priority DESC, x.run_at, x.id
            -- room for the ones other claims hold locked
            LIMIT a.ask * 2
        ) AS c
        CROSS JOIN LATERAL (
            SELECT
                j.id,
                j.priority,
                j.run_at,
                j.cancel_requested OR COALESCE(j.expires_at <= now(), false) AS gone
            FROM akadze_jobs AS j
            WHERE j.id = c.id
                AND j.state = 'queued'
                AND j.parked = 'limit'
                AND NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = j.queue)
            FOR UPDATE SKIP LOCKED
        ) AS r
        LIMIT a.ask
    ) AS p
),
candidates AS (
    -- the jobs the claim may take: unlimited ones, a keyed group's first in the index, an
    -- unkeyed group's first `room`, and the parked ones read; each with its place k in its group
    SELECT
        c.*,
        row_number() OVER (PARTITION BY c.grp ORDER BY c.priority DESC, c.run_at, c.id) AS k
    FROM (
        SELECT f.id, f.priority, f.run_at, f.grp, false AS parked
        FROM from_index AS f
        LEFT JOIN groups AS g ON g.grp = f.grp
        WHERE f.grp IS NULL
            OR (CASE WHEN g.key IS NULL THEN f.n <= g.room ELSE f.n = 1 AND (g.room IS NULL OR g.room > 0) END)
        UNION ALL
        SELECT p.id, p.priority, p.run_at, CASE WHEN p.gone THEN NULL ELSE p.grp END, true
        FROM from_parked AS p
    ) AS c
),
fitting AS (
    SELECT c.*
    FROM candidates AS c
    LEFT JOIN groups AS g ON g.grp = c.grp
    WHERE c.grp IS NULL OR g.room IS NULL OR c.k <= g.room
),
ordered AS (
    -- the claim's first :limit jobs in fair order, each with its place kk among its group's
    SELECT
        f.id,
        f.grp,
        f.parked,
        g.conc,
        row_number() OVER (PARTITION BY f.grp ORDER BY f.priority DESC, f.run_at, f.id) AS kk
    FROM (
        SELECT t.*
        FROM fitting AS t
        ORDER BY t.priority DESC, t.k, t.run_at, t.id
        LIMIT CAST(:limit AS bigint)
    ) AS f
    LEFT JOIN groups AS g ON g.grp = f.grp
),
unfit AS (
    -- jobs read from the index that the claim parks whatever it grants: their group is full, or
    -- they are a keyed group's later jobs
    SELECT f.id, f.grp
    FROM from_index AS f
    WHERE f.grp IS NOT NULL
        AND f.id NOT IN (SELECT t.id FROM fitting AS t)
),
wanted AS (
    SELECT
        g.grp,
        count(o.id) AS wanted,
        g.conc,
        g.rate,
        g.per,
        g.examined,
        COALESCE(array_agg(o.id ORDER BY o.kk) FILTER (WHERE o.id IS NOT NULL), '{}') AS ids,
        EXISTS (SELECT 1 FROM unfit AS u WHERE u.grp = g.grp) AS parks,
        COALESCE((SELECT a.ask FROM asked AS a WHERE a.grp = g.grp), 0) AS ask,
        (SELECT count(*) FROM from_parked AS p WHERE p.grp = g.grp) AS got
    FROM groups AS g
    LEFT JOIN ordered AS o ON o.grp = g.grp
    GROUP BY g.grp, g.conc, g.rate, g.per, g.examined
),
granted AS (
    INSERT INTO akadze_limit_groups AS g (grp, running, starts, started, granted, taken_by, taken_at, due_at)
    SELECT
        n.grp,
        CASE WHEN n.conc IS NULL THEN 0 ELSE n.base + n.grant END,
        CASE WHEN n.rate IS NULL THEN '{}' ELSE array_fill(now(), ARRAY[n.grant]) END,
        CASE WHEN n.rate IS NULL THEN '{}' ELSE n.ids[1:n.grant] END,
        n.grant,
        pg_current_xact_id(),
        now(),
        -- a new row: due only when this claim parks jobs of it, or looked at jobs parked by
        -- their enqueue and left some (a full share read, or no room for any)
        CASE
            WHEN NOT (n.parks OR n.grant < n.wanted OR (n.examined AND (n.ask = 0 OR n.got >= n.ask))) THEN NULL
            WHEN (least(n.conc - n.base - n.grant, n.rate - n.grant) > 0) IS NOT FALSE THEN now()
            ELSE least(
                now() + make_interval(secs => CAST(:recheck_s AS double precision)),
                CASE WHEN n.rate IS NOT NULL AND n.grant >= n.rate THEN now() + n.per END
            )
        END
    FROM (
        SELECT
            c.*,
            CAST(greatest(least(c.wanted, c.conc - c.base, c.rate), 0) AS integer) AS grant
        FROM (
            SELECT
                w.*,
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
    SET (running, starts, started, granted, taken_by, taken_at, due_at) = (
        SELECT
            CASE WHEN v.conc IS NULL THEN 0 ELSE v.base + v.grant END,
            CASE WHEN v.rate IS NULL THEN '{}' ELSE v.kept_starts || array_fill(now(), ARRAY[v.grant]) END,
            CASE WHEN v.rate IS NULL THEN '{}' ELSE v.kept_started || v.ids[1:v.grant] END,
            v.grant,
            pg_current_xact_id(),
            now(),
            CASE
                -- parked jobs wait (parked here, left parked, or a full share read: maybe more)
                WHEN v.parks OR v.grant < v.wanted OR (v.examined AND (v.ask = 0 OR v.got >= v.ask)) THEN
                    CASE
                        WHEN v.ask = 0 AND NOT v.parks AND v.grant >= v.wanted
                            AND g.due_at IS NULL THEN NULL
                        WHEN (least(v.conc - v.base - v.grant, v.rate - cardinality(v.kept_starts) - v.grant) > 0)
                            IS NOT FALSE THEN now()
                        ELSE least(
                            now() + make_interval(secs => CAST(:recheck_s AS double precision)),
                            CASE
                                WHEN v.rate IS NOT NULL AND cardinality(v.kept_starts) + v.grant >= v.rate
                                THEN COALESCE(v.kept_starts[1], now()) + v.per
                            END
                        )
                    END
                -- examined with room and fewer parked jobs than asked: none left, if this
                -- snapshot sees every claim that wrote the row (a parked job locked by another
                -- claim is still seen here)
                WHEN v.examined
                    AND pg_visible_in_snapshot(g.taken_by, (SELECT snapshot FROM snap))
                    -- the group's first parked job, in index order (a plan walks the index)
                    AND {first_parked} IS NULL
                THEN NULL
                ELSE g.due_at
            END
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
                    w.per,
                    w.ids,
                    w.parks,
                    w.examined,
                    w.ask,
                    w.got,
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
),
claimed AS (
    UPDATE akadze_jobs AS j
    SET
        {claim_set},
        limit_grp = CASE WHEN o.conc IS NOT NULL THEN o.grp END,
        parked = NULL
    FROM ordered AS o
    LEFT JOIN granted AS t ON t.grp = o.grp
    WHERE j.id = o.id
        -- the rows to update named by key as well: the generic plan, which estimates a
        -- parameterized LIMIT at a tenth of the table, otherwise may hash-join a sequential scan
        -- of akadze_jobs when the table is small (seen in a CI run with 20,000 rows)
        AND j.id = ANY (ARRAY(SELECT o2.id FROM ordered AS o2))
        AND (o.grp IS NULL OR o.kk <= t.granted)
    {claim_returning}
),
parking AS (
    -- the index's jobs this claim holds back: of a full group, a keyed group's later ones, and
    -- the wanted ones its grant did not cover; the parked ones not granted stay as they are
    UPDATE akadze_jobs AS j
    SET parked = 'limit', limit_grp = h.grp
    FROM (
        SELECT u.id, u.grp FROM unfit AS u
        UNION ALL
        SELECT o.id, o.grp
        FROM ordered AS o
        JOIN granted AS t ON t.grp = o.grp
        WHERE NOT o.parked AND o.kk > t.granted
    ) AS h
    WHERE j.id = h.id
        AND j.id = ANY (ARRAY(SELECT u2.id FROM unfit AS u2 UNION ALL SELECT o3.id FROM ordered AS o3))
    RETURNING j.id
),
-- the workflow steps cancelled at this claim: their waiting children are cancelled with them,
-- or released if they run whatever their parents' end ({settle_steps}, db/sql.py)
ended AS (
    {claimed_cancelled_steps}
),
{settle_steps}
SELECT claimed.*, CAST(NULL AS boolean) AS more
FROM claimed
UNION ALL
SELECT {no_job_row}, EXISTS (SELECT 1 FROM parking)
WHERE EXISTS (SELECT 1 FROM parking)
    OR EXISTS (SELECT 1 FROM wanted AS w WHERE w.examined AND w.ask > 0 AND w.got >= w.ask)
    -- the walk of the arrivals stopped at :limit groups: there may be more
    OR (SELECT count(*) FROM arrived) >= CAST(:limit AS bigint)
