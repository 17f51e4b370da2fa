-- 0003_queue_pauses: paused queues (a row per paused queue; every claim skips them), and the
-- indexes of the dashboard's job listing and overview.

CREATE TABLE akadze_queue_pauses (
    queue text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- The jobs listing filters by state, task or queue, newest first, a page at a time after the
-- last id seen (keyset): each filter walks one of these in id order and stops after a page,
-- however many finished rows there are. Combined filters use one of them (or a bitmap AND).
-- They hold finished rows only: a partial index is written only by the UPDATE that makes its
-- predicate true, so enqueue and claim never touch them and a job costs one entry in each, at
-- its end (with these three as full indexes, the WAL per enqueued job went from 379 to 617
-- bytes). Queued and running jobs are few and the newest: the primary key reaches them.
CREATE INDEX akadze_jobs_state_id_idx
    ON akadze_jobs (state, id)
    WHERE state IN ('succeeded', 'failed', 'cancelled');

CREATE INDEX akadze_jobs_task_id_idx
    ON akadze_jobs (task, id)
    WHERE state IN ('succeeded', 'failed', 'cancelled');

CREATE INDEX akadze_jobs_queue_id_idx
    ON akadze_jobs (queue, id)
    WHERE state IN ('succeeded', 'failed', 'cancelled');

-- Failures of the last hour per queue (the overview): failed rows only, so it stays small.
CREATE INDEX akadze_jobs_failed_idx
    ON akadze_jobs (finished_at)
    WHERE state = 'failed';
