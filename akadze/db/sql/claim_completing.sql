-- claim_completing: the worker's one statement per claim cycle. It writes the outcomes of :batch (done),
-- then claims up to :limit ready jobs of :queues (claimed), and commits both at once; with no
-- outcomes it only claims, and with no queues (and :limit 0) it only writes (the completer,
-- complete_tx). Its rows are the claimed jobs (written false), then the written ones (written
-- true, the columns a write does not return NULL), then the workflow steps their ends released
-- or cancelled (written NULL, the same columns as the written ones).
--
-- done: ends many runs. Each outcome applies only while its (id, run) still owns a running job:
-- a rescued or re-claimed job is left alone (fencing). A cancel request or expiry on the locked
-- row turns a cancellable outcome into cancelled and gives the attempt back (spec: a running job
-- that raises after a cancel ends cancelled). The batch travels as one JSON array (msgspec
-- encodes it: cheaper than eight typed arrays). A finished job that a waiter marked
-- (mark_awaited) sends its id on akadze_done; jobs nobody waits for send no NOTIFY.
--
-- claimed: takes the ready jobs highest priority first, then run_at, then id, reading a claim
-- index in its own order, so statistics cannot flip the plan; SKIP LOCKED, so claimers never
-- wait. Up to :many_queues queues (MANY_QUEUES, 8), one queue at a time through
-- akadze_jobs_claim_idx (queue, priority DESC, run_at, id): per queue the priorities present are walked from the highest down (one index
-- probe each: a loose index scan) and each priority's jobs are read as the range
-- run_at <= now(), so delayed jobs are never read, whatever their priority. Past them (a
-- thousand queues would be a thousand probes), one walk of akadze_jobs_claim_many_idx
-- (priority DESC, run_at, id; its predicate queue <> '' is stated only here) over every queue,
-- passing over the ready jobs of queues this worker does not serve; the queue test is a hashed
-- set built once (IS TRUE keeps the planner from turning it into a join that reads every ready
-- job before sorting them). The branch not taken is cut by its constant condition before it
-- reads anything. A paused queue (akadze_queue_pauses) is skipped before its rows are read.
-- A job cancelled or expired before it starts ends cancelled here without running. The run
-- counter grows at every claim and fences every later write of this run.
--
-- The two writes cannot meet: done updates running jobs owned by the runs it names, claimed
-- locks and updates jobs that are queued in the statement's snapshot, which every part of a
-- statement shares (a job done sends back to queued is claimed by a later statement). The JSON
-- columns come back as text, decoded per job by the worker: a row that cannot be decoded fails
-- alone instead of the whole reply. A claimed job's result is not sent: it has none it needs.
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
),
-- up to :many_queues queues: one queue at a time (with more, unnest(NULL) gives none)
per_queue AS (
    SELECT p.tid
    FROM unnest(
        CASE WHEN cardinality(CAST(:queues AS text[])) <= CAST(:many_queues AS integer) THEN CAST(:queues AS text[]) END
    ) AS q(name)
    CROSS JOIN LATERAL (
        WITH RECURSIVE {queue_levels}
        SELECT r.id, r.tid, r.priority, r.run_at
        FROM level
        CROSS JOIN LATERAL (
            SELECT j.id, j.ctid AS tid, j.priority, j.run_at
            {level_ready}
            LIMIT CAST(:limit AS bigint)
            FOR UPDATE SKIP LOCKED
        ) AS r
        WHERE NOT EXISTS (SELECT 1 FROM akadze_queue_pauses AS paused WHERE paused.queue = q.name)
        LIMIT CAST(:limit AS bigint)
    ) AS p
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT CAST(:limit AS bigint)
),
-- past :many_queues queues: the priorities present over every queue (none walked up to it)
many_level AS (
    (
        {claimable_priority}
            AND j.queue <> ''
            AND cardinality(CAST(:queues AS text[])) > CAST(:many_queues AS integer)
        ORDER BY j.priority DESC
        LIMIT 1
    )
    UNION ALL
    SELECT (
        {claimable_priority}
            AND j.queue <> ''
            AND j.priority < many_level.priority
        ORDER BY j.priority DESC
        LIMIT 1
    )
    FROM many_level
    WHERE many_level.priority IS NOT NULL
),
across_queues AS (
    SELECT r.tid
    FROM many_level
    CROSS JOIN LATERAL (
        SELECT j.ctid AS tid
        FROM akadze_jobs AS j
        WHERE j.state = 'queued'
            AND j.parked IS NULL
            AND j.queue <> ''
            AND j.priority = many_level.priority
            AND j.run_at <= now()
            AND (j.queue IN (SELECT unnest(CAST(:queues AS text[])))) IS TRUE
            AND j.queue NOT IN (SELECT paused.queue FROM akadze_queue_pauses AS paused)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT CAST(:limit AS bigint)
        FOR UPDATE SKIP LOCKED
    ) AS r
    LIMIT CAST(:limit AS bigint)
),
claimed AS (
    UPDATE akadze_jobs AS j
    SET
        {claim_set}
    WHERE j.ctid = ANY(ARRAY(SELECT per_queue.tid FROM per_queue UNION ALL SELECT across_queues.tid FROM across_queues))
    {claim_returning}
),
-- the workflow steps this statement ended (by an outcome, or cancelled at claim): their
-- waiting children are released or cancelled with them ({settle_steps}, db/sql.py)
ended AS (
    SELECT done.id, done.step, done.state
    FROM done
    WHERE done.workflow_id IS NOT NULL
        AND done.state IN ('succeeded', 'failed', 'cancelled')
    UNION ALL
    {claimed_cancelled_steps}
),
{settle_steps}
SELECT {claimed_reply}, false AS written, NULL AS notified
FROM claimed
UNION ALL
SELECT
    {written_reply},
    true AS written,
    CASE
        WHEN done.awaited AND done.state IN ('succeeded', 'failed', 'cancelled')
        THEN pg_notify('akadze_done', CAST(done.id AS text)) IS NULL
    END AS notified
FROM done
UNION ALL
SELECT {settled_reply}, NULL, settled.notified
FROM settled
