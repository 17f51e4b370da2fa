-- claim_limited: claim.sql for a worker whose tasks have a Limit (a worker without one runs
-- claim.sql, unchanged). Each limited job needs a permit per limit kind: a row of
-- akadze_limit_slots, slot 0..cap-1 of its group ('c' or 'r', then [task, key value] as JSON).
-- Per queue, one scan of akadze_jobs_claim_idx in the claim's order takes other tasks' jobs
-- and the limited tasks' jobs whose group has room, and walks past the others: held jobs never
-- fill the claim, the same claim takes the other ready jobs. The scans lock what they take FOR
-- UPDATE SKIP LOCKED (claimers never wait on jobs; rows taken and then not claimed are released at
-- commit), then permits are written with INSERT ... ON CONFLICT DO UPDATE WHERE the permit is free, which
-- locks the permit's latest version and decides on it (ordered by group and slot, so two
-- claims wait on each other's permits in one order and never deadlock). A concurrency permit
-- is held while its job runs with its run, or while the claim that took it is not in this
-- statement's snapshot; a rate permit until free_at. A job that did not get every permit it
-- needs is not claimed (it stays queued, spends nothing); a permit taken for it is then free
-- again (concurrency) or spent (rate: a ceiling, never a reservation). Nothing gives a
-- permit back: ends, rescues and put-backs free it by changing the job. The :l_* arrays are
-- the limits, one item per task: name, key argument or null, concurrency, rate, per (s).
-- A paused queue (akadze_queue_pauses) is skipped by every scan, as in claim.sql. A keyed
-- task's job has its group's permits counted as the scan meets it; a task without a key is
-- one group, whose room is read once.
WITH snap AS (
    -- this statement's snapshot, read once: a permit whose claim it does not see is held
    SELECT pg_current_snapshot() AS snapshot
),
limits AS (
    SELECT l.task, l.key, l.conc, l.rate, l.per_s, CAST(jsonb_build_array(l.task, NULL) AS text) AS whole
    FROM unnest(
        CAST(:l_task AS text[]),
        CAST(:l_key AS text[]),
        CAST(:l_conc AS integer[]),
        CAST(:l_rate AS integer[]),
        CAST(:l_per AS double precision[])
    ) AS l(task, key, conc, rate, per_s)
),
held_whole AS (
    -- the permits in use of the tasks without a key (one group each), read once per claim
    SELECT s.grp, s.slot
    FROM limits AS l
    JOIN akadze_limit_slots AS s ON s.grp = 'c' || l.whole AND s.slot < l.conc
    WHERE l.key IS NULL
        AND CASE
            WHEN s.free_at IS NOT NULL THEN s.free_at > now()
            ELSE NOT pg_visible_in_snapshot(s.taken_by, (SELECT snapshot FROM snap))
                OR COALESCE((
                    SELECT r.run = s.run AND r.state = 'running' FROM akadze_jobs AS r WHERE r.id = s.job_id
                ), false)
        END
    UNION ALL
    SELECT s.grp, s.slot
    FROM limits AS l
    JOIN akadze_limit_slots AS s ON s.grp = 'r' || l.whole AND s.slot < l.rate
    WHERE l.key IS NULL
        AND s.free_at > now()
),
lim AS (
    SELECT
        l.task,
        l.key,
        l.conc,
        l.rate,
        l.per_s,
        -- a task without a key is one group, whose room is known before the scan
        l.key IS NOT NULL OR (
            (l.conc IS NULL OR l.conc > (SELECT count(*) FROM held_whole AS h WHERE h.grp = 'c' || l.whole))
            AND (l.rate IS NULL OR l.rate > (SELECT count(*) FROM held_whole AS h WHERE h.grp = 'r' || l.whole))
        ) AS room
    FROM limits AS l
),
seen AS (
    -- one scan per queue in the claim's order: other tasks' jobs are taken as they come, a
    -- limited task's job when its group has room (or it ends at claim); held jobs are walked past
    SELECT p.id, p.run, p.task, p.priority, p.run_at, p.exempt, p.gkey
    FROM unnest(CAST(:queues AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        SELECT j.id, j.run, j.task, j.priority, j.run_at, g.exempt, g.gkey
        FROM akadze_jobs AS j
        LEFT JOIN LATERAL (SELECT * FROM lim WHERE lim.task = j.task) AS l ON true
        CROSS JOIN LATERAL (
            SELECT
                l.task IS NULL OR j.cancel_requested OR COALESCE(j.expires_at <= now(), false) AS exempt,
                CAST(jsonb_build_array(j.task, CASE WHEN l.key IS NOT NULL THEN j.args -> l.key END) AS text) AS gkey
        ) AS g
        WHERE j.state = 'queued'
            AND j.queue = q.name
            AND j.run_at <= now()
            AND NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
            AND (
                g.exempt
                OR l.room AND (
                    l.key IS NULL
                    OR (
                        (l.conc IS NULL OR l.conc > (
                            SELECT count(*)
                            FROM akadze_limit_slots AS s
                            WHERE s.grp = 'c' || g.gkey
                                AND s.slot < l.conc
                                AND (
                                    NOT pg_visible_in_snapshot(s.taken_by, (SELECT snapshot FROM snap))
                                    OR COALESCE((
                                        SELECT r.run = s.run AND r.state = 'running' FROM akadze_jobs AS r WHERE r.id = s.job_id
                                    ), false)
                                )
                        ))
                        AND (l.rate IS NULL OR l.rate > (
                            SELECT count(*)
                            FROM akadze_limit_slots AS s
                            WHERE s.grp = 'r' || g.gkey
                                AND s.slot < l.rate
                                AND s.free_at > now()
                        ))
                    )
                )
            )
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT :limit
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
),
ordered AS (
    SELECT s.id, s.run, s.task, s.exempt, s.gkey, row_number() OVER (ORDER BY s.priority DESC, s.run_at, s.id) AS ord
    FROM seen AS s
),
needs AS (
    SELECT o.id, o.ord, 'c' || o.gkey AS grp, l.conc AS cap, CAST(NULL AS double precision) AS per_s, l.key IS NOT NULL AS keyed
    FROM ordered AS o
    JOIN lim AS l ON l.task = o.task
    WHERE NOT o.exempt
        AND l.conc IS NOT NULL
    UNION ALL
    SELECT o.id, o.ord, 'r' || o.gkey, l.rate, l.per_s, l.key IS NOT NULL
    FROM ordered AS o
    JOIN lim AS l ON l.task = o.task
    WHERE NOT o.exempt
        AND l.rate IS NOT NULL
),
ranked AS (
    SELECT n.id, n.grp, n.cap, n.per_s, n.keyed, row_number() OVER (PARTITION BY n.grp ORDER BY n.ord) AS k
    FROM needs AS n
),
groups AS (
    SELECT r.grp, r.cap, r.keyed, max(r.k) AS wanted
    FROM ranked AS r
    GROUP BY r.grp, r.cap, r.keyed
),
held AS (
    -- the groups' permits in use: a rate permit until free_at; a concurrency permit while its
    -- job runs with its run, or while the claim that took it is not in this snapshot
    SELECT h.grp, h.slot
    FROM held_whole AS h
    WHERE h.grp IN (SELECT g.grp FROM groups AS g WHERE NOT g.keyed)
    UNION ALL
    SELECT s.grp, s.slot
    FROM groups AS g
    JOIN akadze_limit_slots AS s ON s.grp = g.grp AND s.slot < g.cap
    WHERE g.keyed
        AND CASE
            WHEN s.free_at IS NOT NULL THEN s.free_at > now()
            ELSE NOT pg_visible_in_snapshot(s.taken_by, (SELECT snapshot FROM snap))
                OR COALESCE((
                    SELECT r.run = s.run AND r.state = 'running' FROM akadze_jobs AS r WHERE r.id = s.job_id
                ), false)
        END
),
free_slots AS (
    -- free slots among the first (in use + wanted), so a group's rows stay about as many as its
    -- peak use; in a random order: two claims racing for one group rarely want the same slot
    SELECT g.grp, n.slot, row_number() OVER (PARTITION BY g.grp ORDER BY random()) AS k
    FROM groups AS g
    CROSS JOIN LATERAL generate_series(
        0,
        least(g.cap, g.wanted + (SELECT count(*) FROM held AS h WHERE h.grp = g.grp)) - 1
    ) AS n(slot)
    WHERE NOT EXISTS (SELECT 1 FROM held AS h WHERE h.grp = g.grp AND h.slot = n.slot)
),
paired AS (
    SELECT r.id, r.grp, f.slot, r.per_s
    FROM ranked AS r
    JOIN free_slots AS f ON f.grp = r.grp AND f.k = r.k
),
chosen AS (
    SELECT o.id, o.run
    FROM ordered AS o
    WHERE (SELECT count(*) FROM needs AS n WHERE n.id = o.id) = (SELECT count(*) FROM paired AS p WHERE p.id = o.id)
    ORDER BY o.ord
    LIMIT :limit
),
permits AS (
    INSERT INTO akadze_limit_slots AS s (grp, slot, job_id, run, taken_by, taken_at, free_at)
    SELECT p.grp, p.slot, p.id, l.run + 1, pg_current_xact_id(), now(), now() + make_interval(secs => p.per_s)
    FROM paired AS p
    JOIN chosen AS l ON l.id = p.id
    ORDER BY p.grp, p.slot
    ON CONFLICT (grp, slot) DO UPDATE
    SET
        job_id = EXCLUDED.job_id,
        run = EXCLUDED.run,
        taken_by = EXCLUDED.taken_by,
        taken_at = EXCLUDED.taken_at,
        free_at = EXCLUDED.free_at
    WHERE CASE
        WHEN s.free_at IS NOT NULL THEN s.free_at <= now()
        ELSE pg_visible_in_snapshot(s.taken_by, (SELECT snapshot FROM snap))
            AND NOT COALESCE((
                SELECT r.run = s.run AND r.state = 'running' FROM akadze_jobs AS r WHERE r.id = s.job_id
            ), false)
    END
    RETURNING s.job_id
),
claimable AS (
    SELECT l.id
    FROM chosen AS l
    WHERE (SELECT count(*) FROM paired AS p WHERE p.id = l.id) = (SELECT count(*) FROM permits AS t WHERE t.job_id = l.id)
)
UPDATE akadze_jobs AS j
SET
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST(:worker_id AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END
FROM claimable
WHERE j.id = claimable.id
RETURNING
    j.id,
    j.task,
    j.queue,
    j.state,
    j.priority,
    CAST(j.args AS text) AS args,
    j.attempt,
    j.max_attempts,
    j.run,
    j.run_at,
    j.expires_at,
    j.cancel_requested,
    CAST(j.errors AS text) AS errors,
    NULL AS result,
    j.worker_id,
    j.args_fp,
    j.created_at,
    j.started_at,
    j.finished_at,
    j.trace_context
