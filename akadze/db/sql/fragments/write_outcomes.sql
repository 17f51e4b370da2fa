-- {write_outcomes}: the CTE done, which ends many runs: the outcomes of :batch, in every form of
-- the worker's claim (claim_completing.sql and its plain forms). Each outcome applies only
-- while its (id, run) still owns a running job: a rescued or re-claimed job is left alone
-- (fencing). A cancel request or expiry on the locked row turns a cancellable outcome into
-- cancelled and gives the attempt back (spec: a running job that raises after a cancel ends
-- cancelled). The batch travels as one JSON array (msgspec encodes it: cheaper than eight typed
-- arrays). Returns what a write reports (akadze.outcomes.Completed), whether a waiter marked the
-- job (mark_awaited) and its workflow step, if it is one.
done AS (
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
        -- errors that are not an array (a row written by another producer) are replaced: such
        -- a row must not fail the batch of outcomes it is written with
        errors = CASE
            WHEN c.error IS NULL THEN j.errors
            ELSE (
                SELECT COALESCE(jsonb_agg(e.value ORDER BY e.n), '[]')
                FROM jsonb_array_elements(
                    CASE WHEN jsonb_typeof(j.errors) = 'array' THEN j.errors ELSE '[]' END
                    || jsonb_build_array(c.error || jsonb_build_object('at', now()))
                ) WITH ORDINALITY AS e(value, n)
                WHERE e.n > (CASE WHEN jsonb_typeof(j.errors) = 'array' THEN jsonb_array_length(j.errors) ELSE 0 END)
                    + 1 - CAST(:max_errors AS integer)
            )
        END,
        worker_id = NULL,
        -- a retry of a task with retry_priority takes that priority (docs/worker.md, retry herds)
        priority = COALESCE(c.priority, j.priority)
    FROM jsonb_to_recordset(CAST(:batch AS jsonb)) AS c(
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
    RETURNING j.id, j.task, j.queue, j.state, j.attempt, j.run, j.run_at, j.awaited, j.workflow_id, j.step
)
