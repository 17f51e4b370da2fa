-- 0011_pooler_functions: the statements of a worker's claim cycle as PL/pgSQL functions, for
-- workers behind a pooler in transaction mode (akadze.db.pooled). There nothing stays prepared
-- on a server, so PostgreSQL planned each claim at every call, which cost about as much as
-- running it. A function keeps its query's plan for the server session's life, whichever
-- client the pooler hands the session to. Each body is its statement's text of this version
-- (akadze/db/sql); a later change to one of them replaces its function in a new migration
-- (tests/db/test_pooled.py compares them). Direct connections keep their prepared statements
-- and do not call these.

-- claim(queues, limit, worker_id)
CREATE OR REPLACE FUNCTION akadze_claim(text[], int8, uuid)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    priority int4,
    args text,
    attempt int4,
    max_attempts int4,
    run int4,
    run_at timestamptz,
    expires_at timestamptz,
    cancel_requested bool,
    errors text,
    result text,
    worker_id uuid,
    args_fp text,
    created_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    trace_context text,
    trace_parent bytea
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH picked AS (
    SELECT p.tid
    FROM unnest(CAST($1 AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE level AS (
            (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                ORDER BY j.priority DESC
                LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                    AND j.priority < level.priority
                ORDER BY j.priority DESC
                LIMIT 1
            )
            FROM level
            WHERE level.priority IS NOT NULL
        )
        SELECT r.id, r.tid, r.priority, r.run_at
        FROM level
        CROSS JOIN LATERAL (
            SELECT j.id, j.ctid AS tid, j.priority, j.run_at
            FROM akadze_jobs AS j
            WHERE j.state = 'queued'
                AND j.queue = q.name
                AND j.priority = level.priority
                AND j.run_at <= now()
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        ) AS r
        WHERE NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        LIMIT $2
    ) AS p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT $2
)
UPDATE akadze_jobs AS j
SET
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST($3 AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END
WHERE j.ctid = ANY(ARRAY(SELECT picked.tid FROM picked))
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
    j.trace_context,
    j.trace_parent;
END
$akadze$;

-- claim_many(queues, limit, worker_id)
CREATE OR REPLACE FUNCTION akadze_claim_many(text[], int8, uuid)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    priority int4,
    args text,
    attempt int4,
    max_attempts int4,
    run int4,
    run_at timestamptz,
    expires_at timestamptz,
    cancel_requested bool,
    errors text,
    result text,
    worker_id uuid,
    args_fp text,
    created_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    trace_context text,
    trace_parent bytea
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH RECURSIVE level AS (
    (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority < level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM level
    WHERE level.priority IS NOT NULL
),
picked AS (
    SELECT r.tid
    FROM level
    CROSS JOIN LATERAL (
        SELECT j.ctid AS tid
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority = level.priority
            AND j.run_at <= now()
            AND (j.queue IN (SELECT unnest(CAST($1 AS text[])))) IS TRUE
            AND j.queue NOT IN (SELECT paused.queue FROM akadze_queue_pauses AS paused)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT $2
        FOR UPDATE SKIP LOCKED
    ) AS r
    LIMIT $2
)
UPDATE akadze_jobs AS j
SET
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST($3 AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END
WHERE j.ctid = ANY(ARRAY(SELECT picked.tid FROM picked))
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
    j.trace_context,
    j.trace_parent;
END
$akadze$;

-- claim_limited(l_task, l_key, l_conc, l_rate, l_per, queues, limit, worker_id)
CREATE OR REPLACE FUNCTION akadze_claim_limited(text[], text[], int4[], int4[], float8[], text[], int8, uuid)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    priority int4,
    args text,
    attempt int4,
    max_attempts int4,
    run int4,
    run_at timestamptz,
    expires_at timestamptz,
    cancel_requested bool,
    errors text,
    result text,
    worker_id uuid,
    args_fp text,
    created_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    trace_context text,
    trace_parent bytea
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH snap AS (
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
        CAST($1 AS text[]),
        CAST($2 AS text[]),
        CAST($3 AS integer[]),
        CAST($4 AS integer[]),
        CAST($5 AS double precision[])
    ) AS l(task, key, conc, rate, per_s)
),
lim AS MATERIALIZED (
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
    SELECT p.id, p.priority, p.run_at, p.grp, p.conc, p.rate, p.per
    FROM unnest(CAST($6 AS text[])) AS q(name)
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
        LIMIT $7
        FOR UPDATE OF j SKIP LOCKED
    ) AS p
),
ordered AS (
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
        LIMIT $7
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
                CASE
                    WHEN w.conc IS NULL OR (SELECT true FROM akadze_limit_groups AS x WHERE x.grp = w.grp) THEN 0
                    ELSE (SELECT count(*) FROM akadze_jobs AS r WHERE r.limit_grp = w.grp AND r.state NOT IN ('queued', 'succeeded', 'failed', 'cancelled'))
                END AS base
            FROM wanted AS w
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
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST($8 AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END,
    limit_grp = CASE WHEN o.conc IS NOT NULL THEN o.grp END
FROM ordered AS o
LEFT JOIN granted AS t ON t.grp = o.grp
WHERE j.id = o.id
    AND j.id = ANY (ARRAY(SELECT o2.id FROM ordered AS o2))
    AND (o.grp IS NULL OR o.k <= t.granted)
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
    j.trace_context,
    j.trace_parent;
END
$akadze$;

-- claim_completing(max_errors, batch, queues, limit, worker_id)
CREATE OR REPLACE FUNCTION akadze_claim_completing(int4, jsonb, text[], int8, uuid)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    priority int4,
    args text,
    attempt int4,
    max_attempts int4,
    run int4,
    run_at timestamptz,
    expires_at timestamptz,
    cancel_requested bool,
    errors text,
    result text,
    worker_id uuid,
    args_fp text,
    created_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    trace_context text,
    trace_parent bytea,
    written bool,
    notified bool
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH done AS (
UPDATE akadze_jobs AS j
SET
    state = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN 'cancelled'
        ELSE c.state
    END,
    attempt = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN greatest(j.attempt - 1, 0)
        ELSE c.attempt
    END,
    run_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN j.run_at
        WHEN c.state = 'queued' THEN now() + make_interval(secs => c.delay_s)
        ELSE j.run_at
    END,
    finished_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN now()
        WHEN c.state = 'queued' THEN NULL
        ELSE now()
    END,
    result = c.result,
    errors = CASE
        WHEN c.error IS NULL THEN j.errors
        ELSE (
            SELECT COALESCE(jsonb_agg(e.value ORDER BY e.n), '[]')
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END
                || jsonb_build_array(c.error || jsonb_build_object('at', now()))
            ) WITH ORDINALITY AS e(value, n)
            WHERE e.n > (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN jsonb_array_length(j.errors) ELSE 0 END)
                + 1 - $1
        )
    END,
    worker_id = NULL,
    priority = COALESCE(c.priority, j.priority)
FROM jsonb_to_recordset(CAST($2 AS jsonb)) AS c(
    id bigint,
    run integer,
    state text,
    attempt integer,
    delay_s double precision,
    result jsonb,
    error jsonb,
    cancellable boolean,
    priority integer
)
WHERE j.id = c.id
    AND j.run = c.run
    AND j.state = 'running'
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.run, j.run_at, j.awaited
),
picked AS (
    SELECT p.tid
    FROM unnest(CAST($3 AS text[])) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE level AS (
            (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                ORDER BY j.priority DESC
                LIMIT 1
            )
            UNION ALL
            SELECT (
                SELECT j.priority
                FROM akadze_jobs AS j
                WHERE j.state = 'queued'
                    AND j.queue = q.name
                    AND j.priority < level.priority
                ORDER BY j.priority DESC
                LIMIT 1
            )
            FROM level
            WHERE level.priority IS NOT NULL
        )
        SELECT r.id, r.tid, r.priority, r.run_at
        FROM level
        CROSS JOIN LATERAL (
            SELECT j.id, j.ctid AS tid, j.priority, j.run_at
            FROM akadze_jobs AS j
            WHERE j.state = 'queued'
                AND j.queue = q.name
                AND j.priority = level.priority
                AND j.run_at <= now()
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT $4
            FOR UPDATE SKIP LOCKED
        ) AS r
        WHERE NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        LIMIT $4
    ) AS p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT $4
),
claimed AS (
UPDATE akadze_jobs AS j
SET
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST($5 AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END
WHERE j.ctid = ANY(ARRAY(SELECT picked.tid FROM picked))
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
    j.trace_context,
    j.trace_parent
)
SELECT claimed.id, claimed.task, claimed.queue, claimed.state, claimed.priority, claimed.args, claimed.attempt, claimed.max_attempts, claimed.run, claimed.run_at, claimed.expires_at, claimed.cancel_requested, claimed.errors, claimed.result, claimed.worker_id, claimed.args_fp, claimed.created_at, claimed.started_at, claimed.finished_at, claimed.trace_context, claimed.trace_parent, false AS written, NULL AS notified
FROM claimed
UNION ALL
SELECT d.id, d.task, d.queue, d.state, NULL AS priority, NULL AS args, d.attempt, NULL AS max_attempts, d.run, d.run_at, NULL AS expires_at, NULL AS cancel_requested, NULL AS errors, NULL AS result, NULL AS worker_id, NULL AS args_fp, NULL AS created_at, NULL AS started_at, NULL AS finished_at, NULL AS trace_context, NULL AS trace_parent, true AS written, d.notified
FROM (
SELECT
    id,
    task,
    queue,
    state,
    attempt,
    run,
    run_at,
    CASE
        WHEN awaited AND state IN ('succeeded', 'failed', 'cancelled') THEN pg_notify('akadze_done', CAST(id AS text)) IS NULL
    END AS notified
FROM done
) AS d;
END
$akadze$;

-- claim_many_completing(max_errors, batch, queues, limit, worker_id)
CREATE OR REPLACE FUNCTION akadze_claim_many_completing(int4, jsonb, text[], int8, uuid)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    priority int4,
    args text,
    attempt int4,
    max_attempts int4,
    run int4,
    run_at timestamptz,
    expires_at timestamptz,
    cancel_requested bool,
    errors text,
    result text,
    worker_id uuid,
    args_fp text,
    created_at timestamptz,
    started_at timestamptz,
    finished_at timestamptz,
    trace_context text,
    trace_parent bytea,
    written bool,
    notified bool
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH RECURSIVE done AS (
UPDATE akadze_jobs AS j
SET
    state = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN 'cancelled'
        ELSE c.state
    END,
    attempt = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN greatest(j.attempt - 1, 0)
        ELSE c.attempt
    END,
    run_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN j.run_at
        WHEN c.state = 'queued' THEN now() + make_interval(secs => c.delay_s)
        ELSE j.run_at
    END,
    finished_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN now()
        WHEN c.state = 'queued' THEN NULL
        ELSE now()
    END,
    result = c.result,
    errors = CASE
        WHEN c.error IS NULL THEN j.errors
        ELSE (
            SELECT COALESCE(jsonb_agg(e.value ORDER BY e.n), '[]')
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END
                || jsonb_build_array(c.error || jsonb_build_object('at', now()))
            ) WITH ORDINALITY AS e(value, n)
            WHERE e.n > (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN jsonb_array_length(j.errors) ELSE 0 END)
                + 1 - $1
        )
    END,
    worker_id = NULL,
    priority = COALESCE(c.priority, j.priority)
FROM jsonb_to_recordset(CAST($2 AS jsonb)) AS c(
    id bigint,
    run integer,
    state text,
    attempt integer,
    delay_s double precision,
    result jsonb,
    error jsonb,
    cancellable boolean,
    priority integer
)
WHERE j.id = c.id
    AND j.run = c.run
    AND j.state = 'running'
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.run, j.run_at, j.awaited
),
level AS (
    (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        SELECT j.priority
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority < level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM level
    WHERE level.priority IS NOT NULL
),
picked AS (
    SELECT r.tid
    FROM level
    CROSS JOIN LATERAL (
        SELECT j.ctid AS tid
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.queue <> ''
            AND j.priority = level.priority
            AND j.run_at <= now()
            AND (j.queue IN (SELECT unnest(CAST($3 AS text[])))) IS TRUE
            AND j.queue NOT IN (SELECT paused.queue FROM akadze_queue_pauses AS paused)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT $4
        FOR UPDATE SKIP LOCKED
    ) AS r
    LIMIT $4
),
claimed AS (
UPDATE akadze_jobs AS j
SET
    state = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN 'cancelled' ELSE 'running' END,
    attempt = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.attempt ELSE j.attempt + 1 END,
    run = j.run + 1,
    worker_id = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN NULL ELSE CAST($5 AS uuid) END,
    started_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN j.started_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested OR j.expires_at <= now() THEN now() END
WHERE j.ctid = ANY(ARRAY(SELECT picked.tid FROM picked))
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
    j.trace_context,
    j.trace_parent
)
SELECT claimed.id, claimed.task, claimed.queue, claimed.state, claimed.priority, claimed.args, claimed.attempt, claimed.max_attempts, claimed.run, claimed.run_at, claimed.expires_at, claimed.cancel_requested, claimed.errors, claimed.result, claimed.worker_id, claimed.args_fp, claimed.created_at, claimed.started_at, claimed.finished_at, claimed.trace_context, claimed.trace_parent, false AS written, NULL AS notified
FROM claimed
UNION ALL
SELECT d.id, d.task, d.queue, d.state, NULL AS priority, NULL AS args, d.attempt, NULL AS max_attempts, d.run, d.run_at, NULL AS expires_at, NULL AS cancel_requested, NULL AS errors, NULL AS result, NULL AS worker_id, NULL AS args_fp, NULL AS created_at, NULL AS started_at, NULL AS finished_at, NULL AS trace_context, NULL AS trace_parent, true AS written, d.notified
FROM (
SELECT
    id,
    task,
    queue,
    state,
    attempt,
    run,
    run_at,
    CASE
        WHEN awaited AND state IN ('succeeded', 'failed', 'cancelled') THEN pg_notify('akadze_done', CAST(id AS text)) IS NULL
    END AS notified
FROM done
) AS d;
END
$akadze$;

-- complete_batch(max_errors, batch)
CREATE OR REPLACE FUNCTION akadze_complete_batch(int4, jsonb)
RETURNS TABLE (
    id int8,
    task text,
    queue text,
    state text,
    attempt int4,
    run int4,
    run_at timestamptz,
    notified bool
)
LANGUAGE plpgsql VOLATILE
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $akadze$
#variable_conflict use_column
BEGIN
RETURN QUERY
WITH done AS (
UPDATE akadze_jobs AS j
SET
    state = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN 'cancelled'
        ELSE c.state
    END,
    attempt = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN greatest(j.attempt - 1, 0)
        ELSE c.attempt
    END,
    run_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN j.run_at
        WHEN c.state = 'queued' THEN now() + make_interval(secs => c.delay_s)
        ELSE j.run_at
    END,
    finished_at = CASE
        WHEN c.cancellable AND (j.cancel_requested OR j.expires_at <= now()) THEN now()
        WHEN c.state = 'queued' THEN NULL
        ELSE now()
    END,
    result = c.result,
    errors = CASE
        WHEN c.error IS NULL THEN j.errors
        ELSE (
            SELECT COALESCE(jsonb_agg(e.value ORDER BY e.n), '[]')
            FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END
                || jsonb_build_array(c.error || jsonb_build_object('at', now()))
            ) WITH ORDINALITY AS e(value, n)
            WHERE e.n > (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN jsonb_array_length(j.errors) ELSE 0 END)
                + 1 - $1
        )
    END,
    worker_id = NULL,
    priority = COALESCE(c.priority, j.priority)
FROM jsonb_to_recordset(CAST($2 AS jsonb)) AS c(
    id bigint,
    run integer,
    state text,
    attempt integer,
    delay_s double precision,
    result jsonb,
    error jsonb,
    cancellable boolean,
    priority integer
)
WHERE j.id = c.id
    AND j.run = c.run
    AND j.state = 'running'
RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.run, j.run_at, j.awaited
)
SELECT
    id,
    task,
    queue,
    state,
    attempt,
    run,
    run_at,
    CASE
        WHEN awaited AND state IN ('succeeded', 'failed', 'cancelled') THEN pg_notify('akadze_done', CAST(id AS text)) IS NULL
    END AS notified
FROM done;
END
$akadze$;
