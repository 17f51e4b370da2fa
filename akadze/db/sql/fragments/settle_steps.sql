-- {settle_steps}: what a workflow step's end does to the steps that wait for it (docs/workflows.md), as CTEs
-- after one named ``ended`` (id, step, state): the steps this statement ended. ``ended_edge``:
-- their edges, read once. ``reach``: the
-- steps that may change, from the edges alone (the children of the ended steps, and through a
-- child that a failure may cancel, its children). ``locked``: those steps, locked in id
-- order (a parent's id is below its children's), read as they are now, after any wait;
-- ``waiting``: those still waiting, so a step released or cancelled by another statement
-- meanwhile is left alone. ``doomed``: the
-- waiting steps cancelled by a failed or cancelled parent, level by level (after_failure
-- 'cancel'). ``counted``: how many parents each other waiting step sees finish here (the
-- succeeded ones, and for after_failure 'run' every end, the doomed parents included).
-- ``settled`` writes them once each: cancelled with a DependencyFailed entry naming the first
-- such parent, or deps_left lowered and, at 0, released (parked NULL, run_at not before now).
-- Its rows say what it did, and it sends the NOTIFYs of what it did (RETURNING, so that they
-- go out whether or not the statement reads them).
-- Two statements ending parents of one step meet on its row lock: the second reads the first's
-- count, so a fan-in is released exactly once. With no workflow step ended, every CTE is empty.
--
-- Every read of the edges is an index probe per step (akadze_job_deps_pkey) through
-- unnest(ARRAY(...)), which the planner takes for 10 rows whatever the statistics. A join or a
-- lateral subquery would be estimated at the edges per parent on average (a fan-out of
-- 100,000 steps made that 100,000; migration 0017 states 2), and the recursive UNIONs below
-- size their hash tables from the estimate: every statement, workflow or not, paid for
-- allocating them (0.2-0.3 ms a claim, docs/performance.md).
ended_edge(parent_step, child_id, state) AS (
    SELECT e.step, d.child_id, e.state
    FROM ended AS e
    CROSS JOIN LATERAL unnest(ARRAY(
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = e.id
    )) AS d(child_id)
),
reach(id, failing) AS (
    SELECT ended_edge.child_id, ended_edge.state <> 'succeeded'
    FROM ended_edge
    UNION
    SELECT d.child_id, true
    FROM reach AS r
    CROSS JOIN LATERAL unnest(ARRAY(
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = r.id
    )) AS d(child_id)
    WHERE r.failing
        AND (SELECT c.after_failure FROM akadze_jobs AS c WHERE c.id = r.id) = 'cancel'
),
locked AS MATERIALIZED (
    -- by primary key only: a test of state or parked here would let a plan walk every parked
    -- job's entry (akadze_jobs_parked_idx) at every claim
    SELECT w.id, w.step, w.after_failure, w.state = 'queued' AND w.parked = 'deps' AS waits
    FROM akadze_jobs AS w
    WHERE w.id = ANY (ARRAY(SELECT DISTINCT reach.id FROM reach))
    ORDER BY w.id
    FOR UPDATE
),
waiting AS (
    SELECT locked.id, locked.step, locked.after_failure
    FROM locked
    WHERE locked.waits
),
doomed(id, step, cause, cause_state) AS (
    SELECT l.id, l.step, f.parent_step, f.state
    FROM ended_edge AS f
    JOIN waiting AS l ON l.id = f.child_id
    WHERE f.state <> 'succeeded'
        AND l.after_failure = 'cancel'
    UNION
    SELECT l.id, l.step, p.step, 'cancelled'
    FROM doomed AS p
    CROSS JOIN LATERAL unnest(ARRAY(
        SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = p.id
    )) AS d(child_id)
    JOIN waiting AS l ON l.id = d.child_id
    WHERE l.after_failure = 'cancel'
),
counted AS (
    SELECT f.id, count(*) AS n
    FROM (
        SELECT ended_edge.child_id AS id, ended_edge.state = 'succeeded' AS ok
        FROM ended_edge
        UNION ALL
        SELECT d.child_id, false
        FROM (SELECT DISTINCT doomed.id FROM doomed) AS p
        CROSS JOIN LATERAL unnest(ARRAY(
            SELECT x.child_id FROM akadze_job_deps AS x WHERE x.parent_id = p.id
        )) AS d(child_id)
    ) AS f
    JOIN waiting AS l ON l.id = f.id
    WHERE (f.ok OR l.after_failure = 'run')
        AND l.id NOT IN (SELECT doomed.id FROM doomed)
    GROUP BY f.id
),
settled AS (
    UPDATE akadze_jobs AS j
    SET
        state = CASE WHEN s.cause IS NULL THEN j.state ELSE 'cancelled' END,
        finished_at = CASE WHEN s.cause IS NULL THEN j.finished_at ELSE now() END,
        errors = CASE
            WHEN s.cause IS NULL THEN j.errors
            ELSE (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END)
                || jsonb_build_array(jsonb_build_object(
                    'attempt', j.attempt,
                    'at', now(),
                    'type', 'akadze.DependencyFailed',
                    'message', format('step %s ended %s', quote_literal(s.cause), s.cause_state)
                ))
        END,
        deps_left = CASE WHEN s.cause IS NULL THEN j.deps_left - s.n ELSE j.deps_left END,
        parked = CASE WHEN s.cause IS NULL AND j.deps_left - s.n <= 0 THEN NULL ELSE j.parked END,
        run_at = CASE
            WHEN s.cause IS NULL AND j.deps_left - s.n <= 0 THEN greatest(j.run_at, now())
            ELSE j.run_at
        END
    FROM (
        SELECT l.id, m.cause, m.cause_state, COALESCE(c.n, 0) AS n
        FROM waiting AS l
        LEFT JOIN (
            SELECT DISTINCT ON (doomed.id) doomed.id, doomed.cause, doomed.cause_state
            FROM doomed
            ORDER BY doomed.id, doomed.cause
        ) AS m ON m.id = l.id
        LEFT JOIN counted AS c ON c.id = l.id
        WHERE m.id IS NOT NULL OR c.n > 0
    ) AS s
    WHERE j.id = s.id
        AND j.id = ANY (ARRAY(SELECT waiting.id FROM waiting))
    -- a step released and ready now wakes the workers of its queue (one NOTIFY per queue and
    -- transaction: PostgreSQL folds repeats); a cancelled one a waiter marked (mark_awaited)
    -- sends its id on akadze_done. Here, so that it happens whether or not the reply is read
    RETURNING
        j.id,
        j.task,
        j.queue,
        j.state,
        j.attempt,
        j.run,
        j.run_at,
        j.parked,
        CASE
            WHEN j.state = 'queued' AND j.parked IS NULL AND j.run_at <= now()
            THEN pg_notify('akadze_jobs', j.queue) IS NULL
            WHEN j.awaited AND j.state = 'cancelled'
            THEN pg_notify('akadze_done', CAST(j.id AS text)) IS NULL
        END AS notified
)
